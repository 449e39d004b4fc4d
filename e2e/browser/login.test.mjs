// Browser test of Gatehouse's login pages, run by node's built-in test
// runner from e2e/browser_test.go (TestBrowserLogin), which starts the
// embedded server, creates the OIDC app and passes everything in
// GATEHOUSE_BROWSER_* variables. It drives Debian's Chromium through
// playwright-core: English login name page, switch to German, password
// page, a wrong password, sign-in up to the redirect_uri, logout with its
// confirmation, and the error page, with a screenshot of every page and
// basic accessibility checks.
//
// Run it through Go: `cd e2e && go test -run TestBrowserLogin -v .`
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through e2e/browser_test.go (go test -run TestBrowserLogin)`);
  return v;
}

const issuer = env('GATEHOUSE_BROWSER_ISSUER');
const authorizeURL = env('GATEHOUSE_BROWSER_AUTHORIZE_URL');
const redirectURI = env('GATEHOUSE_BROWSER_REDIRECT_URI');
const state = env('GATEHOUSE_BROWSER_STATE');
const loginName = env('GATEHOUSE_BROWSER_LOGIN_NAME');
const password = env('GATEHOUSE_BROWSER_PASSWORD');
const artifacts = env('GATEHOUSE_BROWSER_ARTIFACTS');
const executablePath = process.env.GATEHOUSE_BROWSER_CHROMIUM || '/usr/bin/chromium';
const partnerOrg = env('GATEHOUSE_BROWSER_PARTNER_ORG');
const partnerLogin = env('GATEHOUSE_BROWSER_PARTNER_LOGIN');
const partnerPassword = env('GATEHOUSE_BROWSER_PARTNER_PASSWORD');
const upstream = env('GATEHOUSE_BROWSER_UPSTREAM');
const issuerOrigin = new URL(issuer).origin;
const redirectOrigin = new URL(redirectURI).origin;

// withParams returns the authorize URL with some parameters replaced.
function withParams(params) {
  const u = new URL(authorizeURL);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.href;
}

// callbackPage stands in for the relying party at the redirect_uri.
const callbackPage = '<!DOCTYPE html><html lang="en"><head><title>Relying party</title></head>' +
  '<body><main><h1>Relying party callback</h1><p>The browser came back with the authorization response.</p></main></body></html>';

let browser;
let page;
const callbacks = []; // every request the browser made to the redirect_uri
const blocked = []; // requests to anywhere but Gatehouse and the redirect_uri
const consoleErrors = [];
const interceptErrors = []; // failures of the request interception itself
let broken = ''; // the first failed step: later steps depend on it

// step is one it() of the journey; after a failure the rest are skipped
// (they would fail for the same reason) and the page is captured.
function step(name, fn) {
  it(name, async (t) => {
    if (broken) {
      t.skip(`an earlier step failed: ${broken}`);
      return;
    }
    try {
      await fn();
    } catch (err) {
      broken = name;
      await page?.screenshot({ path: path.join(artifacts, `failure-${name.replace(/\W+/g, '-')}.png`), fullPage: true }).catch(() => {});
      throw err;
    }
  });
}

async function screenshot(name) {
  await page.screenshot({ path: path.join(artifacts, name), fullPage: true });
}

// checkPage asserts what every Gatehouse page must have: the language on
// <html>, a title, one h1 inside main, the stylesheet applied (CSP allows
// it), a label for every visible input, and aria-describedby targets that
// exist.
async function checkPage(lang, heading) {
  const facts = await page.evaluate(() => {
    const problems = [];
    for (const input of document.querySelectorAll('input, select, textarea')) {
      if (input.type === 'hidden' || input.hidden) continue;
      const named = input.id && document.querySelector(`label[for="${CSS.escape(input.id)}"]`);
      const labelled = (named && named.textContent.trim()) || input.closest('label') ||
        input.getAttribute('aria-label') || input.getAttribute('aria-labelledby');
      if (!labelled) problems.push(`input ${input.name || input.outerHTML} has no label`);
      for (const id of (input.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean)) {
        if (!document.getElementById(id)) problems.push(`input ${input.name}: aria-describedby ${id} does not exist`);
      }
    }
    for (const b of document.querySelectorAll('button')) {
      if (!b.textContent.trim() && !b.getAttribute('aria-label')) problems.push('a button has no accessible name');
    }
    const card = document.querySelector('main.card');
    return {
      lang: document.documentElement.lang,
      title: document.title,
      h1: [...document.querySelectorAll('main h1')].map((h) => h.textContent.trim()),
      radius: card ? getComputedStyle(card).borderTopLeftRadius : '',
      problems,
    };
  });
  assert.equal(facts.lang, lang, '<html lang>');
  assert.deepEqual(facts.h1, [heading], 'one h1 in main');
  assert.equal(facts.title, `${heading} · Gatehouse`, '<title>');
  assert.equal(facts.radius, '12px', 'style.css is loaded and applied (.card border radius)');
  assert.deepEqual(facts.problems, [], 'accessibility problems');
}

// focused returns the id of the element that has the focus.
const focused = () => page.evaluate(() => document.activeElement?.id || '');

describe('login pages in Chromium', () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--disable-quic', '--no-first-run'],
    });
    const context = await browser.newContext({ locale: 'en-US', colorScheme: 'light', viewport: { width: 800, height: 640 } });
    page = await context.newPage();
    // Only Gatehouse is reached. The relying party's redirect_uri (a
    // closed port) is answered here with a small page (and 404 for
    // anything else on its origin), so the browser never connects to it;
    // any other address is refused and reported.
    // Playwright's page.route does not see the request that follows a
    // redirect (Gatehouse's 302 to the redirect_uri), so this uses the
    // DevTools Fetch domain, which pauses every request, redirects too.
    const cdp = await context.newCDPSession(page);
    cdp.on('Fetch.requestPaused', ({ requestId, request }) => {
      let answer;
      if (request.url.startsWith(redirectURI)) {
        callbacks.push(request.url);
        answer = cdp.send('Fetch.fulfillRequest', {
          requestId,
          responseCode: 200,
          responseHeaders: [{ name: 'Content-Type', value: 'text/html; charset=utf-8' }],
          body: Buffer.from(callbackPage).toString('base64'),
        });
      } else if (new URL(request.url).origin === redirectOrigin) {
        // The stand-in relying party has nothing else (its page's favicon).
        answer = cdp.send('Fetch.fulfillRequest', { requestId, responseCode: 404, body: '' });
      } else if (new URL(request.url).origin === issuerOrigin || new URL(request.url).origin === new URL(upstream).origin) {
        // Gatehouse, and the upstream identity provider it signs in with.
        answer = cdp.send('Fetch.continueRequest', { requestId });
      } else {
        blocked.push(request.url);
        answer = cdp.send('Fetch.failRequest', { requestId, errorReason: 'BlockedByClient' });
      }
      answer.catch((err) => interceptErrors.push(`${request.url}: ${err.message}`));
    });
    await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }] });
    page.setDefaultTimeout(10_000);
    // Chromium logs every 4xx answer as "Failed to load resource"; the
    // pages that answer 400/401 on purpose are checked step by step, and
    // the stylesheet by its computed style, so only other errors count
    // (a CSP violation, a script error).
    page.on('console', (m) => {
      if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) {
        consoleErrors.push(`${page.url()}: ${m.text()}`);
      }
    });
    page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  });

  after(async () => {
    await browser?.close();
  });

  step('shows the login name page in English', async () => {
    const res = await page.goto(authorizeURL);
    assert.equal(res.status(), 200);
    assert.match(page.url(), /\/ui\/login\/login\?/);
    await checkPage('en', 'Sign in');
    assert.match(await page.locator('main p').first().textContent(), /Sign in to continue to shop-web\./);
    assert.equal(await page.getByLabel('Login name').count(), 1);
    assert.equal(await focused(), 'loginName', 'the login name field has the focus');
    await screenshot('01-loginname-en.png');
  });

  step('switches the language to German (ui_locales=de)', async () => {
    const res = await page.goto(withParams({ ui_locales: 'de' }));
    assert.equal(res.status(), 200);
    await checkPage('de', 'Anmelden');
    assert.match(await page.locator('main p').first().textContent(), /Melden Sie sich an, um mit shop-web fortzufahren\./);
    assert.equal(await page.getByLabel('Loginname').count(), 1);
    assert.equal(await page.getByRole('button', { name: 'Weiter' }).count(), 1);
    // Self-registration is off under the default login policy: no link.
    assert.equal(await page.getByRole('link', { name: 'Konto erstellen' }).count(), 0);
    await screenshot('02-loginname-de.png');
  });

  step('asks for the password after the login name', async () => {
    await page.getByLabel('Loginname').fill(loginName);
    await Promise.all([
      page.waitForURL(/\/ui\/login\/password\?/),
      page.getByRole('button', { name: 'Weiter' }).click(),
    ]);
    await checkPage('de', 'Passwort eingeben');
    assert.equal((await page.locator('main .user').textContent()).trim(), loginName);
    assert.equal(await focused(), 'password', 'the password field has the focus');
    await screenshot('03-password-de.png');
  });

  step('shows an error tied to the field for a wrong password', async () => {
    await page.getByLabel('Passwort').fill('not-the-password');
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST' && r.url().startsWith(`${issuerOrigin}/ui/login/password`)),
      page.getByRole('button', { name: 'Anmelden' }).click(),
    ]);
    assert.equal(res.status(), 401);
    await page.waitForLoadState();
    await checkPage('de', 'Passwort eingeben');
    const alert = page.getByRole('alert');
    assert.equal((await alert.textContent()).trim(), 'Der Loginname oder das Passwort ist falsch.');
    const input = page.getByLabel('Passwort');
    assert.equal(await input.getAttribute('aria-invalid'), 'true');
    assert.equal(await input.getAttribute('aria-describedby'), await alert.getAttribute('id'));
    assert.equal(await focused(), 'password', 'the field in error has the focus');
    assert.equal(callbacks.length, 0, 'no redirect to the client after a wrong password');
    await screenshot('04-password-error-de.png');
  });

  step('signs in and redirects to the redirect_uri with code and state', async () => {
    await page.getByLabel('Passwort').fill(password);
    await Promise.all([
      page.waitForURL((u) => u.href.startsWith(redirectURI)),
      page.getByRole('button', { name: 'Anmelden' }).click(),
    ]);
    const u = new URL(page.url());
    assert.equal(u.origin + u.pathname, redirectURI);
    assert.ok(u.searchParams.get('code'), 'code in the redirect');
    assert.equal(u.searchParams.get('state'), state);
    assert.equal(u.searchParams.get('error'), null);
    assert.equal(callbacks.length, 1);
    await screenshot('05-callback.png');
  });

  step('logs out at end_session after the confirmation', async () => {
    // Without an id_token_hint, Gatehouse asks before it ends the sessions.
    let res = await page.goto(`${issuer}/oidc/v1/end_session`);
    assert.equal(res.status(), 200);
    await checkPage('en', 'Sign out?');
    assert.match(await page.locator('main').textContent(), /These accounts will be signed out on this browser:/);
    // The signed-in account is listed (by its full login name, user@org-domain).
    const accounts = await page.locator('main .accounts .login').allTextContents();
    assert.equal(accounts.length, 1, `one account listed: ${accounts}`);
    assert.ok(accounts[0] === loginName || accounts[0].startsWith(`${loginName}@`), `listed account ${accounts[0]}`);
    await screenshot('06-logout-confirm-en.png');

    [res] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${issuerOrigin}/oidc/v1/end_session`),
      page.getByRole('button', { name: 'Sign out' }).click(),
    ]);
    assert.equal(res.status(), 200);
    await page.waitForLoadState();
    await checkPage('en', 'You are signed out');
    assert.match(await page.locator('main p').first().textContent(), /You have been signed out\. You can close this window\./);
    await screenshot('07-loggedout-en.png');

    // The session is gone: a silent authorization now needs a login.
    await page.goto(withParams({ prompt: 'none', state: 'after-logout' }));
    const u = new URL(page.url());
    assert.equal(u.origin + u.pathname, redirectURI);
    assert.equal(u.searchParams.get('error'), 'login_required');
    assert.equal(u.searchParams.get('state'), 'after-logout');
  });

  step('shows the error page for an unregistered redirect_uri', async () => {
    const before = callbacks.length;
    const res = await page.goto(withParams({ redirect_uri: `${redirectURI}/unregistered` }));
    assert.equal(res.status(), 400);
    assert.equal(new URL(page.url()).origin, issuerOrigin, 'the error is shown on Gatehouse, not redirected');
    await checkPage('en', 'Something went wrong');
    assert.match(await page.getByRole('alert').textContent(), /The application sent a request that cannot be processed\./);
    assert.match(await page.locator('main').textContent(), /invalid_request/);
    assert.equal(callbacks.length, before, 'no redirect to an unregistered URI');
    await screenshot('08-error-en.png');
  });

  step('asks a user of a granted organization for consent, keyboard first', async () => {
    const before = callbacks.length;
    await page.goto(withParams({ scope: `openid profile urn:gatehouse:iam:org:id:${partnerOrg}`, state: 'consent', ui_locales: 'en' }));
    await page.getByLabel('Login name').fill(partnerLogin);
    await Promise.all([page.waitForURL(/\/ui\/login\/password\?/), page.keyboard.press('Enter')]);
    await page.getByLabel('Password').fill(partnerPassword);
    await Promise.all([page.waitForURL(/\/ui\/login\/consent\?/), page.keyboard.press('Enter')]);
    await checkPage('en', 'Allow access');
    assert.match(await page.locator('main p').first().textContent(), /shop-web asks for access to your account pat@/);
    const scopes = await page.locator('main .scopes li').allTextContents();
    assert.deepEqual(scopes, ['Sign you in with your account', 'Your name and profile'], 'the org scope grants nothing to list');
    assert.equal(callbacks.length, before, 'no redirect before the user consents');
    await screenshot('09-consent-en.png');
    // Keyboard only: the first button (Allow) is reached by Tab and
    // pressed with Enter.
    await page.locator('button[value="accept"]').focus();
    await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectURI)), page.keyboard.press('Enter')]);
    const u = new URL(page.url());
    assert.ok(u.searchParams.get('code'), 'code after consent');
    assert.equal(u.searchParams.get('state'), 'consent');
    await screenshot('10-consent-callback.png');
  });

  step('signs in through an external identity provider by its button', async () => {
    await page.goto(withParams({ state: 'idp', ui_locales: 'en' }));
    const button = page.getByRole('button', { name: 'Sign in with Upstream' });
    assert.equal(await button.count(), 1, 'the identity provider button');
    await screenshot('11-idp-button-en.png');
    await Promise.all([page.waitForURL((u) => u.href.startsWith(upstream)), button.click()]);
    await page.getByLabel('Login name').fill('fed');
    await Promise.all([page.waitForURL(/\/ui\/login\/password\?/), page.keyboard.press('Enter')]);
    await page.getByLabel('Password').fill('Fed-Passw0rd!1');
    await screenshot('12-upstream-login.png');
    await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectURI)), page.keyboard.press('Enter')]);
    const u = new URL(page.url());
    assert.ok(u.searchParams.get('code'), 'code after the federated sign-in');
    assert.equal(u.searchParams.get('state'), 'idp');
    await screenshot('13-idp-callback.png');
  });

  step('stayed on Gatehouse, its identity provider and the redirect_uri, without page errors', async () => {
    assert.deepEqual(blocked, [], 'requests outside Gatehouse');
    assert.deepEqual(interceptErrors, [], 'request interception');
    assert.deepEqual(consoleErrors, [], 'console errors (a CSP violation would show here)');
  });
});
