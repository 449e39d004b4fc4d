// Browser test of the device flow's pages (RFC 8628), run by node's test
// runner from e2e/browser_device_test.go (TestBrowserDeviceFlow), which
// starts the embedded server, registers a device app and a user per
// language, asks for four device codes and passes their
// verification_uri_complete in GATEHOUSE_BROWSER_* variables. Real
// Chromium through playwright-core: the code page (prefilled), a wrong
// code, the sign-in, the consent page with the code, Allow; then Deny for a
// second device; in English and German, with a screenshot of every page
// and axe-core's check (no serious or critical violation) on each. The
// pages carry no script.
//
// Run it through Go: `cd e2e && go test -run TestBrowserDeviceFlow -v .`
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium } from 'playwright-core';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through e2e/browser_device_test.go`);
  return v;
}

const issuer = env('GATEHOUSE_BROWSER_ISSUER');
const artifacts = env('GATEHOUSE_BROWSER_ARTIFACTS');
const password = env('GATEHOUSE_BROWSER_PASSWORD');
const users = { en: env('GATEHOUSE_BROWSER_USER_EN'), de: env('GATEHOUSE_BROWSER_USER_DE') };
const approve = { en: env('GATEHOUSE_BROWSER_APPROVE_EN'), de: env('GATEHOUSE_BROWSER_APPROVE_DE') };
const deny = { en: env('GATEHOUSE_BROWSER_DENY_EN'), de: env('GATEHOUSE_BROWSER_DENY_DE') };
const executablePath = process.env.GATEHOUSE_BROWSER_CHROMIUM || '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const issuerOrigin = new URL(issuer).origin;

const text = {
  en: { title: 'Connect a device', submit: 'Continue', wrong: /unknown, expired or was used/, next: 'Next', signIn: 'Sign in',
    consent: 'Sign in on a device', allow: 'Allow', deny: 'Deny', approved: /Your device is signed in/, denied: /The device was not signed in/,
    label: 'Code', login: 'Login name' },
  de: { title: 'Gerät verbinden', submit: 'Weiter', wrong: /unbekannt, abgelaufen oder wurde bereits verwendet/, next: 'Weiter',
    signIn: 'Anmelden', consent: 'Auf einem Gerät anmelden', allow: 'Erlauben', deny: 'Ablehnen', approved: /Ihr Gerät ist angemeldet/,
    denied: /Das Gerät wurde nicht angemeldet/, label: 'Code', login: 'Loginname' },
};

let browser;
const consoleErrors = [];

// capture screenshots the page, runs axe-core on it and checks it has no script.
async function capture(page, name) {
  await page.screenshot({ path: path.join(artifacts, name), fullPage: true });
  assert.doesNotMatch(await page.content(), /<script/i, `${name} carries a script`);
  const violations = await page.evaluate(async (src) => {
    if (!window.axe) (0, eval)(src); // eslint-disable-line no-eval
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, axeSource);
  assert.deepEqual(violations, [], `axe-core on ${name}`);
}

async function submitAndWait(page, button) {
  await Promise.all([page.waitForNavigation(), button.click()]);
}

function withLocale(u, lang) {
  const url = new URL(u);
  url.searchParams.set('ui_locales', lang);
  return url.href;
}

describe('the device flow in Chromium', () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--disable-quic', '--no-first-run'],
    });
  });

  after(async () => {
    await browser?.close();
  });

  for (const lang of ['en', 'de']) {
    const t = text[lang];
    it(`code page → wrong code → sign in → Allow; Deny for a second device (${lang})`, async () => {
      const context = await browser.newContext({ locale: lang === 'de' ? 'de-DE' : 'en-US', colorScheme: 'light',
        viewport: { width: 800, height: 640 } });
      const page = await context.newPage();
      page.setDefaultTimeout(10_000);
      await page.route('**/*', (route) => (new URL(route.request().url()).origin === issuerOrigin ? route.continue() : route.abort()));
      page.on('console', (m) => {
        if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) consoleErrors.push(`${page.url()}: ${m.text()}`);
      });
      page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));

      const code = new URL(approve[lang]).searchParams.get('user_code');
      // A wrong code first: the page again, with the error.
      await page.goto(withLocale(`${issuer}/device`, lang));
      assert.equal(await page.locator('h1').textContent(), t.title);
      await page.getByLabel(t.label).fill('BCDF-GHJK');
      await submitAndWait(page, page.getByRole('button', { name: t.submit }));
      assert.match(await page.locator('main').textContent(), t.wrong);
      await capture(page, `device-wrong-${lang}.png`);

      // verification_uri_complete fills the code in; the person confirms it.
      await page.goto(withLocale(approve[lang], lang));
      assert.equal(await page.getByLabel(t.label).inputValue(), code);
      await capture(page, `device-${lang}.png`);
      await submitAndWait(page, page.getByRole('button', { name: t.submit }));
      await page.locator('#loginName').fill(users[lang]);
      await submitAndWait(page, page.getByRole('button', { name: t.next }));
      await page.locator('#password').fill(password);
      await submitAndWait(page, page.getByRole('button', { name: t.signIn }));
      assert.equal(await page.locator('h1').textContent(), t.consent);
      const main = await page.locator('main').textContent();
      assert.ok(main.includes(code), 'the consent page shows the code');
      assert.ok(main.includes('Living Room TV'), 'the consent page names the app');
      await capture(page, `device-consent-${lang}.png`);
      await submitAndWait(page, page.getByRole('button', { name: t.allow }));
      assert.match(await page.locator('main').textContent(), t.approved);
      await capture(page, `device-approved-${lang}.png`);

      // A second device: the browser is signed in, so the consent page
      // follows the code page at once.
      await page.goto(withLocale(deny[lang], lang));
      await submitAndWait(page, page.getByRole('button', { name: t.submit }));
      assert.equal(await page.locator('h1').textContent(), t.consent);
      await submitAndWait(page, page.getByRole('button', { name: t.deny }));
      assert.match(await page.locator('main').textContent(), t.denied);
      await capture(page, `device-denied-${lang}.png`);
      await context.close();
    });
  }

  it('no script error', () => {
    assert.deepEqual(consoleErrors, []);
  });
});
