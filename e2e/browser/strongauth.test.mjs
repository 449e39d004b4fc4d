// Browser test of strong authentication, run by node's test runner from
// e2e/browser_strongauth_test.go (TestBrowserStrongAuth), which starts
// the embedded server on http://localhost:PORT (WebAuthn needs a host
// name), creates the app and the users and passes everything in
// GATEHOUSE_BROWSER_* variables. Real Chromium through playwright-core,
// with the DevTools protocol's WebAuthn domain as the authenticators: a
// platform authenticator (passkeys, user verification) in one tab and a
// USB security key in another. It registers a passkey on the account
// page and signs in with it without a password, registers a security key
// and uses it as the second factor, and walks the TOTP and enrollment
// pages, with a screenshot of every new page in English and German and
// axe-core's check (no serious or critical violation) on each.
//
// Run it through Go: `cd e2e && go test -run TestBrowserStrongAuth -v .`
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium } from 'playwright-core';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through e2e/browser_strongauth_test.go`);
  return v;
}

const issuer = env('GATEHOUSE_BROWSER_ISSUER');
const authorizeURL = env('GATEHOUSE_BROWSER_AUTHORIZE_URL');
const redirectURI = env('GATEHOUSE_BROWSER_REDIRECT_URI');
const artifacts = env('GATEHOUSE_BROWSER_ARTIFACTS');
const alice = env('GATEHOUSE_BROWSER_ALICE'); // login name of the account page's user
const alicePassword = env('GATEHOUSE_BROWSER_ALICE_PASSWORD');
const bob = env('GATEHOUSE_BROWSER_BOB'); // a user the policy makes enroll
const bobPassword = env('GATEHOUSE_BROWSER_BOB_PASSWORD');
const org = env('GATEHOUSE_BROWSER_ORG');
const adminToken = env('GATEHOUSE_BROWSER_ADMIN_TOKEN');
const executablePath = process.env.GATEHOUSE_BROWSER_CHROMIUM || '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const issuerOrigin = new URL(issuer).origin;

let browser;
let context;
let platform; // tab with the platform authenticator (passkeys)
let usb; // tab with the USB security key
const consoleErrors = [];
const interceptErrors = [];
const callbacks = [];
let broken = '';

function withParams(params) {
  const u = new URL(authorizeURL);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.href;
}

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
      for (const [tab, p] of [['platform', platform], ['usb', usb]]) {
        await p?.screenshot({ path: path.join(artifacts, `failure-${tab}-${name.replace(/\W+/g, '-')}.png`), fullPage: true }).catch(() => {});
      }
      throw err;
    }
  });
}

// capture screenshots the page and runs axe-core on it: no serious or
// critical violation. The engine is evaluated through the DevTools
// protocol, which the pages' CSP does not govern (no script is added).
async function capture(page, name) {
  await page.screenshot({ path: path.join(artifacts, name), fullPage: true });
  const violations = await page.evaluate(async (src) => {
    if (!window.axe) (0, eval)(src); // eslint-disable-line no-eval
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, axeSource);
  assert.deepEqual(violations, [], `axe-core on ${name}`);
}

async function heading(page) {
  return (await page.locator('main h1').textContent()).trim();
}

// tab opens a page of the shared context with a virtual authenticator and
// the request interception (the relying party's callback is answered
// here; nothing but Gatehouse is reached).
async function tab(options) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  cdp.on('Fetch.requestPaused', ({ requestId, request }) => {
    let answer;
    if (request.url.startsWith(redirectURI)) {
      callbacks.push(request.url);
      answer = cdp.send('Fetch.fulfillRequest', {
        requestId, responseCode: 200,
        responseHeaders: [{ name: 'Content-Type', value: 'text/html; charset=utf-8' }],
        body: Buffer.from('<!DOCTYPE html><html lang="en"><head><title>RP</title></head><body><main><h1>Callback</h1></main></body></html>').toString('base64'),
      });
    } else if (new URL(request.url).origin === new URL(redirectURI).origin) {
      // The stand-in relying party has nothing else (its page's favicon).
      answer = cdp.send('Fetch.fulfillRequest', { requestId, responseCode: 404, body: '' });
    } else if (new URL(request.url).origin === issuerOrigin) {
      answer = cdp.send('Fetch.continueRequest', { requestId });
    } else {
      answer = cdp.send('Fetch.failRequest', { requestId, errorReason: 'BlockedByClient' });
    }
    answer.catch((err) => interceptErrors.push(`${request.url}: ${err.message}`));
  });
  await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }] });
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', { options });
  page.setDefaultTimeout(10_000);
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) {
      consoleErrors.push(`${page.url()}: ${m.text()}`);
    }
  });
  page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  return { page, cdp, authenticatorId };
}

// submitAndWait clicks a submit button and waits for the navigation the
// form (or the ceremony's script) causes.
async function submitAndWait(page, button) {
  await page.bringToFront(); // WebAuthn answers only the focused document
  await Promise.all([page.waitForNavigation(), button.click()]);
}

describe('strong authentication in Chromium', () => {
  let platformCDP;
  let platformID;
  before(async () => {
    browser = await chromium.launch({
      executablePath, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--disable-quic', '--no-first-run'],
    });
    context = await browser.newContext({ locale: 'en-US', colorScheme: 'light', viewport: { width: 800, height: 720 } });
    const p = await tab({ protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true,
      isUserVerified: true, automaticPresenceSimulation: true });
    platform = p.page;
    platformCDP = p.cdp;
    platformID = p.authenticatorId;
    usb = (await tab({ protocol: 'ctap2', transport: 'usb', hasResidentKey: false, hasUserVerification: false,
      automaticPresenceSimulation: true })).page;
  });

  after(async () => {
    await browser?.close();
  });

  // startAdding presses the account page's button that starts adding a
  // factor (a POST: a GET of the factor's page only leads back here).
  async function startAdding(page, lang, path, type) {
    await page.goto(`${issuer}/ui/account?ui_locales=${lang}`);
    const form = page.locator(`form[action^="/ui/account/${path}?"]`).filter(
      type ? { has: page.locator(`input[name="type"][value="${type}"]`) } : {});
    await submitAndWait(page, form.getByRole('button'));
  }

  step('the account page signs alice in first, then shows her account (en, de)', async () => {
    await platform.goto(`${issuer}/ui/account?org=${org}&ui_locales=en`);
    assert.match(platform.url(), /\/ui\/login\/login\?/);
    await platform.getByLabel('Login name').fill(alice);
    await submitAndWait(platform, platform.getByRole('button', { name: 'Next' }));
    await platform.getByLabel('Password').fill(alicePassword);
    await submitAndWait(platform, platform.getByRole('button', { name: 'Sign in' }));
    assert.equal(new URL(platform.url()).pathname, '/ui/account');
    assert.equal(await heading(platform), 'Your account');
    assert.equal(await platform.locator('script').count(), 0, 'the account page runs no script');
    await capture(platform, 'account-en.png');
    await platform.goto(`${issuer}/ui/account?ui_locales=de`);
    assert.equal(await heading(platform), 'Ihr Konto');
    await capture(platform, 'account-de.png');
  });

  step('registers a passkey on the account page', async () => {
    for (const lang of ['de', 'en']) {
      await startAdding(platform, lang, 'key', 'passwordless');
      await capture(platform, `account-passkey-${lang}.png`);
    }
    assert.equal(await platform.locator('script[nonce]').count(), 1, 'the ceremony page loads the one script under a nonce');
    await platform.getByLabel('Name of the key').fill('Laptop');
    await submitAndWait(platform, platform.getByRole('button', { name: 'Create passkey' }));
    // The first factor brings recovery codes, shown once.
    assert.equal(await platform.locator('ul.codes li').count(), 10);
    await capture(platform, 'account-codes-en.png');
    await platform.getByRole('link', { name: 'I saved them, continue' }).click();
    await platform.waitForURL(/\/ui\/account/);
    assert.match(await platform.locator('main').textContent(), /Passkey: Laptop/);
    const { credentials } = await platformCDP.send('WebAuthn.getCredentials', { authenticatorId: platformID });
    assert.equal(credentials.length, 1);
    assert.equal(credentials[0].isResidentCredential, true, 'a passkey is a discoverable credential');
  });

  step('registers a security key in the other tab', async () => {
    for (const lang of ['de', 'en']) {
      await startAdding(usb, lang, 'key', 'u2f');
      await capture(usb, `account-key-${lang}.png`);
    }
    await usb.getByLabel('Name of the key').fill('YubiKey');
    await submitAndWait(usb, usb.getByRole('button', { name: 'Register security key' }));
    assert.match(await usb.locator('main').textContent(), /Security key: YubiKey/);
  });

  step('shows the other account pages (en, de)', async () => {
    for (const lang of ['en', 'de']) {
      await platform.goto(`${issuer}/ui/account/password?ui_locales=${lang}`);
      await capture(platform, `account-password-${lang}.png`);
      await startAdding(platform, lang, 'totp');
      assert.equal(await platform.locator('svg.qr').count(), 1);
      await capture(platform, `account-totp-${lang}.png`);
    }
  });

  step('signs in with the passkey, without a password (en, de)', async () => {
    await context.clearCookies();
    await platform.goto(withParams({ ui_locales: 'de', state: 'pk-de' }));
    await platform.getByRole('link', { name: 'Mit einem Passkey anmelden' }).click();
    await platform.waitForURL(/\/ui\/login\/passkey/);
    await capture(platform, 'passkey-de.png');
    await platform.goto(withParams({ ui_locales: 'en', state: 'pk-en' }));
    await capture(platform, 'loginname-passkey-en.png');
    await platform.getByRole('link', { name: 'Sign in with a passkey' }).click();
    await platform.waitForURL(/\/ui\/login\/passkey/);
    await capture(platform, 'passkey-en.png');
    await platform.bringToFront();
    await Promise.all([
      platform.waitForURL((u) => u.href.startsWith(redirectURI)),
      platform.getByRole('button', { name: 'Use passkey' }).click(),
    ]);
    const cb = new URL(platform.url());
    assert.equal(cb.searchParams.get('state'), 'pk-en');
    assert.ok(cb.searchParams.get('code'), 'a code came back');
  });

  step('uses the security key as the second factor (en, de)', async () => {
    await context.clearCookies();
    for (const lang of ['de', 'en']) {
      await usb.goto(withParams({ ui_locales: lang, state: `key-${lang}` }));
      await usb.getByLabel(lang === 'de' ? 'Loginname' : 'Login name').fill(alice);
      await submitAndWait(usb, usb.getByRole('button', { name: lang === 'de' ? 'Weiter' : 'Next' }));
      await usb.getByLabel(lang === 'de' ? 'Passwort' : 'Password').fill(alicePassword);
      await submitAndWait(usb, usb.getByRole('button', { name: lang === 'de' ? 'Anmelden' : 'Sign in' }));
      // The factor's page answers the password's post (no redirect).
      assert.equal(await usb.locator('form[action="/ui/login/mfa"]').count(), 1);
      await capture(usb, `mfa-key-${lang}.png`);
      // The code and recovery forms, the other ways in.
      const id = await usb.locator('input[name="authRequestID"]').first().getAttribute('value');
      const mfa = `${issuer}/ui/login/mfa?authRequestID=${encodeURIComponent(id)}`;
      await usb.goto(`${mfa}&method=otp`);
      await capture(usb, `mfa-otp-${lang}.png`);
      await usb.goto(`${mfa}&recovery=1`);
      await capture(usb, `mfa-recovery-${lang}.png`);
      await usb.goto(mfa);
    }
    await usb.bringToFront();
    await Promise.all([
      usb.waitForURL((u) => u.href.startsWith(redirectURI)),
      usb.getByRole('button', { name: 'Use security key' }).click(),
    ]);
    assert.equal(new URL(usb.url()).searchParams.get('state'), 'key-en');
  });

  step('a forced enrollment offers an authenticator app and a security key (en, de)', async () => {
    // The organization now forces a second factor (the management API,
    // from node: not the browser).
    const res = await fetch(`${issuer}/management/v1/policies/login`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ allowUsernamePassword: true, passwordlessType: 'PASSWORDLESS_TYPE_ALLOWED', forceMfa: true }),
    });
    assert.equal(res.status, 200, await res.text());
    await context.clearCookies();
    for (const lang of ['de', 'en']) {
      await usb.goto(withParams({ ui_locales: lang, state: `enroll-${lang}` }));
      await usb.getByLabel(lang === 'de' ? 'Loginname' : 'Login name').fill(bob);
      await submitAndWait(usb, usb.getByRole('button', { name: lang === 'de' ? 'Weiter' : 'Next' }));
      await usb.getByLabel(lang === 'de' ? 'Passwort' : 'Password').fill(bobPassword);
      await submitAndWait(usb, usb.getByRole('button', { name: lang === 'de' ? 'Anmelden' : 'Sign in' }));
      assert.match(usb.url(), /\/ui\/login\/mfa\/init\?/);
      assert.equal(await usb.locator('svg.qr').count(), 1);
      await capture(usb, `mfa-init-otp-${lang}.png`);
      await usb.getByRole('link', { name: lang === 'de' ? 'Stattdessen einen Sicherheitsschlüssel einrichten' : 'Set up a security key instead' }).click();
      await usb.waitForURL(/method=u2f/);
      await capture(usb, `mfa-init-key-${lang}.png`);
    }
    await submitAndWait(usb, usb.getByRole('button', { name: 'Register security key' }));
    assert.equal(await usb.locator('ul.codes li').count(), 10);
    await capture(usb, 'mfa-codes-en.png');
    await Promise.all([
      usb.waitForURL((u) => u.href.startsWith(redirectURI)),
      usb.getByRole('button', { name: 'I saved them, continue' }).click(),
    ]);
    assert.equal(new URL(usb.url()).searchParams.get('state'), 'enroll-en');
  });

  step('no script error, CSP violation or interception failure', async () => {
    assert.deepEqual(consoleErrors, []);
    assert.deepEqual(interceptErrors, []);
    assert.ok(callbacks.length >= 3, 'the relying party got its callbacks');
  });
});
