// Browser test of the password reset by mail, run by node's test runner
// from e2e/browser_reset_test.go (TestBrowserPasswordReset), which starts
// mailpit and the embedded server sending through it, creates the app and
// a user per language and passes everything in GATEHOUSE_BROWSER_*
// variables. Real Chromium through playwright-core: "Forgot password?" on
// the first login page, the login name, the mail (read from mailpit's
// API), the link's page, a new password, and a sign-in with it; in English
// and German, with a screenshot of every page and axe-core's check (no
// serious or critical violation) on each.
//
// Run it through Go: `cd e2e && go test -run TestBrowserPasswordReset -v .`
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium } from 'playwright-core';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through e2e/browser_reset_test.go`);
  return v;
}

const issuer = env('GATEHOUSE_BROWSER_ISSUER');
const authorizeURL = env('GATEHOUSE_BROWSER_AUTHORIZE_URL');
const redirectURI = env('GATEHOUSE_BROWSER_REDIRECT_URI');
const artifacts = env('GATEHOUSE_BROWSER_ARTIFACTS');
const mailpit = env('GATEHOUSE_BROWSER_MAILPIT');
const users = { en: env('GATEHOUSE_BROWSER_USER_EN'), de: env('GATEHOUSE_BROWSER_USER_DE') };
const executablePath = process.env.GATEHOUSE_BROWSER_CHROMIUM || '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const issuerOrigin = new URL(issuer).origin;
const newPassword = 'Brows3r-Reset-Passw0rd!';

const text = {
  en: { forgot: 'Forgot password?', send: 'Send the link', sent: /If the login name belongs/, set: 'Set the password',
    done: /Your password was changed/, subject: 'Reset your password', next: 'Next', signIn: 'Sign in' },
  de: { forgot: 'Passwort vergessen?', send: 'Link senden', sent: /Gehört der Loginname/, set: 'Passwort setzen',
    done: /Ihr Passwort wurde geändert/, subject: 'Passwort zurücksetzen', next: 'Weiter', signIn: 'Anmelden' },
};

let browser;
let context;
let page;
const consoleErrors = [];

// capture screenshots the page and runs axe-core on it.
async function capture(name) {
  await page.screenshot({ path: path.join(artifacts, name), fullPage: true });
  const violations = await page.evaluate(async (src) => {
    if (!window.axe) (0, eval)(src); // eslint-disable-line no-eval
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, axeSource);
  assert.deepEqual(violations, [], `axe-core on ${name}`);
}

async function submitAndWait(button) {
  await Promise.all([page.waitForNavigation(), button.click()]);
}

// mailTo waits for the message to address and returns its text.
async function mailTo(address) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await fetch(`${mailpit}/api/v1/search?query=${encodeURIComponent(`to:${address}`)}`);
    const { messages } = await r.json();
    if (messages?.length) {
      assert.equal(messages.length, 1, `one message to ${address}`);
      const m = await (await fetch(`${mailpit}/api/v1/message/${messages[0].ID}`)).json();
      return { subject: m.Subject, text: m.Text, html: m.HTML };
    }
    if (Date.now() > deadline) throw new Error(`no message to ${address} after 30 s`);
    await new Promise((res) => { setTimeout(res, 100); });
  }
}

function withParams(params) {
  const u = new URL(authorizeURL);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.href;
}

describe('password reset by mail in Chromium', () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--disable-quic', '--no-first-run'],
    });
    context = await browser.newContext({ locale: 'en-US', colorScheme: 'light', viewport: { width: 800, height: 640 } });
    page = await context.newPage();
    // Only Gatehouse is reached. The relying party's callback is answered
    // here through the DevTools Fetch domain, which (unlike page.route)
    // also pauses the request that follows Gatehouse's redirect.
    const cdp = await context.newCDPSession(page);
    cdp.on('Fetch.requestPaused', ({ requestId, request }) => {
      let answer;
      if (request.url.startsWith(redirectURI)) {
        answer = cdp.send('Fetch.fulfillRequest', {
          requestId, responseCode: 200,
          responseHeaders: [{ name: 'Content-Type', value: 'text/html; charset=utf-8' }],
          body: Buffer.from('<!DOCTYPE html><html lang="en"><head><title>RP</title></head><body><main><h1>Callback</h1></main></body></html>').toString('base64'),
        });
      } else if (new URL(request.url).origin === new URL(redirectURI).origin) {
        answer = cdp.send('Fetch.fulfillRequest', { requestId, responseCode: 404, body: '' });
      } else if (new URL(request.url).origin === issuerOrigin) {
        answer = cdp.send('Fetch.continueRequest', { requestId });
      } else {
        answer = cdp.send('Fetch.failRequest', { requestId, errorReason: 'BlockedByClient' });
      }
      answer.catch((err) => consoleErrors.push(`${request.url}: ${err.message}`));
    });
    await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }] });
    page.setDefaultTimeout(10_000);
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) consoleErrors.push(`${page.url()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  });

  after(async () => {
    await browser?.close();
  });

  for (const lang of ['en', 'de']) {
    const t = text[lang];
    const user = users[lang];
    it(`Forgot password? → mail → new password → sign in (${lang})`, async () => {
      await context.clearCookies(); // no session from the language before
      await page.goto(withParams({ ui_locales: lang, state: `reset-${lang}` }));
      await capture(`loginname-${lang}.png`);
      await submitAndWait(page.getByRole('link', { name: t.forgot }));
      assert.match(new URL(page.url()).pathname, /\/ui\/login\/password\/reset$/);
      await capture(`reset-${lang}.png`);
      await page.getByLabel(lang === 'de' ? 'Loginname' : 'Login name').fill(user);
      await submitAndWait(page.getByRole('button', { name: t.send }));
      assert.match(await page.locator('main').textContent(), t.sent);
      await capture(`reset-sent-${lang}.png`);

      const mail = await mailTo(`${user}@example.com`);
      assert.equal(mail.subject, t.subject);
      assert.doesNotMatch(mail.html, /<img|<script/, 'no remote images, no script');
      const link = mail.text.match(/https?:\/\/\S+\/ui\/login\/password\/new\?\S+/)?.[0];
      assert.ok(link?.startsWith(`${issuer}/ui/login/password/new?`), `a link under the issuer in:\n${mail.text}`);

      await page.goto(link);
      await capture(`reset-new-${lang}.png`);
      await page.locator('#newPassword').fill(newPassword);
      await page.locator('#confirmPassword').fill(newPassword);
      await submitAndWait(page.getByRole('button', { name: t.set }));
      assert.match(await page.locator('main').textContent(), t.done);
      await capture(`reset-done-${lang}.png`);

      // The link is used up.
      const again = await page.goto(link);
      assert.equal(again.status(), 400);

      // A sign-in with the new password reaches the relying party.
      await page.goto(withParams({ ui_locales: lang, state: `after-${lang}` }));
      await page.locator('#loginName').fill(user);
      await submitAndWait(page.getByRole('button', { name: t.next }));
      await page.locator('#password').fill(newPassword);
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(redirectURI)),
        page.getByRole('button', { name: t.signIn }).click(),
      ]);
      const cb = new URL(page.url());
      assert.equal(cb.searchParams.get('state'), `after-${lang}`);
      assert.ok(cb.searchParams.get('code'), 'a code came back');
    });
  }

  it('no script error', () => {
    assert.deepEqual(consoleErrors, []);
  });
});
