// Browser test of the device flow's pages (RFC 8628), run by node's test
// runner from e2e/browser_device_test.go (TestBrowserDeviceFlow), which
// starts the embedded server, registers a device app and a user per
// language, asks for four device codes and passes their
// verification_uri_complete in GATEHOUSE_BROWSER_* variables. Real
// Chromium through playwright-core, per language (Accept-Language and
// ui_locales): the code page prefilled from verification_uri_complete, a
// wrong code, the right code typed in lower case without the dash, the
// sign-in, the consent page with the code, Allow; then, in a second
// browser context with JavaScript turned off and the first one's cookies
// (signed in), Deny for a second device. Every page is checked for having
// no script at all (no <script>, no on… handler, no javascript: URL);
// each screenshot page also by axe-core (no serious or critical
// violation).
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
const appName = env('GATEHOUSE_BROWSER_APP');
const users = { en: env('GATEHOUSE_BROWSER_USER_EN'), de: env('GATEHOUSE_BROWSER_USER_DE') };
const approve = { en: env('GATEHOUSE_BROWSER_APPROVE_EN'), de: env('GATEHOUSE_BROWSER_APPROVE_DE') };
const deny = { en: env('GATEHOUSE_BROWSER_DENY_EN'), de: env('GATEHOUSE_BROWSER_DENY_DE') };
const executablePath = process.env.GATEHOUSE_BROWSER_CHROMIUM || '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const issuerOrigin = new URL(issuer).origin;

const text = {
  en: { title: 'Connect a device', submit: 'Continue', wrong: /unknown, expired or was used/, next: 'Next', signIn: 'Sign in',
    consent: 'Sign in on a device', asks: /on a device asks to use your account/, allow: 'Allow', deny: 'Deny',
    approvedTitle: 'Device connected', approved: /Your device is signed in/,
    deniedTitle: 'Device not connected', denied: /The device was not signed in/, label: 'Code' },
  de: { title: 'Gerät verbinden', submit: 'Weiter', wrong: /unbekannt, abgelaufen oder wurde bereits verwendet/, next: 'Weiter',
    signIn: 'Anmelden', consent: 'Auf einem Gerät anmelden', asks: /auf einem Gerät möchte Ihr Konto .* verwenden/,
    allow: 'Erlauben', deny: 'Ablehnen', approvedTitle: 'Gerät verbunden', approved: /Ihr Gerät ist angemeldet/,
    deniedTitle: 'Gerät nicht verbunden', denied: /Das Gerät wurde nicht angemeldet/, label: 'Code' },
};

let browser;
const consoleErrors = [];

// noScript checks that the page works without JavaScript: no script
// element, no inline event handler, no javascript: URL, and its forms
// post to the server.
async function noScript(page, name) {
  assert.doesNotMatch(await page.content(), /<script/i, `${name} carries a script`);
  const found = await page.evaluate(() => {
    const out = [];
    for (const el of document.querySelectorAll('*')) {
      for (const a of el.attributes) {
        if (/^on/i.test(a.name)) out.push(`${el.tagName} ${a.name}`);
        if (/^\s*javascript:/i.test(a.value)) out.push(`${el.tagName} ${a.name}=${a.value}`);
      }
    }
    for (const f of document.forms) {
      if (f.method !== 'post' || !f.getAttribute('action')) out.push(`form ${f.method} ${f.getAttribute('action')}`);
    }
    return out;
  });
  assert.deepEqual(found, [], `${name} needs JavaScript`);
}

// axe runs axe-core on the page (which must have JavaScript on).
async function axe(page, name) {
  const violations = await page.evaluate(async (src) => {
    if (!window.axe) (0, eval)(src); // eslint-disable-line no-eval
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, axeSource);
  assert.deepEqual(violations, [], `axe-core on ${name}`);
}

// capture screenshots the page and checks it.
async function capture(page, name) {
  await page.screenshot({ path: path.join(artifacts, name), fullPage: true });
  await noScript(page, name);
  await axe(page, name);
}

// submitAndWait clicks a submit button and returns the response of the
// page it leads to (after redirects), checking its status.
async function submitAndWait(page, button, status = 200) {
  const [res] = await Promise.all([page.waitForNavigation(), button.click()]);
  assert.equal(res.status(), status, `${res.url()}: status`);
  return res;
}

async function open(page, u, status = 200) {
  const res = await page.goto(u);
  assert.equal(res.status(), status, `${u}: status`);
  return res;
}

function withLocale(u, lang) {
  const url = new URL(u);
  url.searchParams.set('ui_locales', lang);
  return url.href;
}

function contextOptions(lang) {
  return { locale: lang === 'de' ? 'de-DE' : 'en-US', colorScheme: 'light', viewport: { width: 800, height: 640 } };
}

async function newPage(context) {
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  // Nothing leaves the issuer.
  await page.route('**/*', (route) => (new URL(route.request().url()).origin === issuerOrigin ? route.continue() : route.abort()));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) consoleErrors.push(`${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  return page;
}

async function h1(page) {
  return (await page.locator('h1').textContent()).trim();
}

async function main(page) {
  return (await page.locator('main').textContent()).replace(/\s+/g, ' ');
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
    it(`code page → wrong code → sign in → Allow; Deny for a second device without JavaScript (${lang})`, async () => {
      const context = await browser.newContext(contextOptions(lang));
      const page = await newPage(context);
      const code = new URL(approve[lang]).searchParams.get('user_code');
      const denyCode = new URL(deny[lang]).searchParams.get('user_code');
      assert.match(code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);

      // verification_uri_complete fills the code in; the person confirms it.
      await open(page, withLocale(approve[lang], lang));
      assert.equal(await page.locator('html').getAttribute('lang'), lang);
      assert.equal(await h1(page), t.title);
      assert.equal(await page.getByLabel(t.label).inputValue(), code);
      await capture(page, `device-${lang}.png`);

      // A wrong code: 400, the form again with the code kept and the
      // field's error.
      const wrong = code === 'BCDF-GHJK' ? 'ZZZZ-ZZZZ' : 'BCDF-GHJK';
      await page.getByLabel(t.label).fill(wrong);
      await submitAndWait(page, page.getByRole('button', { name: t.submit }), 400);
      assert.equal(await h1(page), t.title);
      assert.match(await main(page), t.wrong);
      assert.equal(await page.getByLabel(t.label).inputValue(), wrong);
      assert.equal(await page.getByLabel(t.label).getAttribute('aria-invalid'), 'true');
      await capture(page, `device-wrong-${lang}.png`);

      // The right code as people type it: lower case, no dash.
      await page.getByLabel(t.label).fill(code.replace('-', '').toLowerCase());
      await submitAndWait(page, page.getByRole('button', { name: t.submit }));
      await noScript(page, `login name page (${lang})`);
      await page.locator('#loginName').fill(users[lang]);
      await submitAndWait(page, page.getByRole('button', { name: t.next }));
      await noScript(page, `password page (${lang})`);
      await page.locator('#password').fill(password);
      await submitAndWait(page, page.getByRole('button', { name: t.signIn }));

      // The consent page, always, with the code as the device shows it.
      assert.equal(await h1(page), t.consent);
      assert.equal(await page.locator('html').getAttribute('lang'), lang);
      const consent = await main(page);
      assert.ok(consent.includes(code), `the consent page shows ${code}: ${consent}`);
      assert.ok(consent.includes(appName), 'the consent page names the app');
      assert.ok(consent.includes(users[lang]), 'the consent page names the account');
      assert.match(consent, t.asks);
      await capture(page, `device-consent-${lang}.png`);
      await submitAndWait(page, page.getByRole('button', { name: t.allow }));
      assert.equal(new URL(page.url()).pathname, '/device/done');
      assert.equal(new URL(page.url()).searchParams.get('result'), 'approved');
      assert.equal(await h1(page), t.approvedTitle);
      assert.match(await main(page), t.approved);
      await capture(page, `device-approved-${lang}.png`);

      // A second device, in a browser without JavaScript that has the
      // first one's cookies: signed in, so the consent page follows the
      // code page at once; Deny.
      const noJS = await browser.newContext({ ...contextOptions(lang), javaScriptEnabled: false,
        storageState: await context.storageState() });
      const page2 = await newPage(noJS);
      await open(page2, withLocale(deny[lang], lang));
      assert.equal(await page2.getByLabel(t.label).inputValue(), denyCode);
      await noScript(page2, `code page without JavaScript (${lang})`);
      await submitAndWait(page2, page2.getByRole('button', { name: t.submit }));
      assert.equal(await h1(page2), t.consent);
      assert.ok((await main(page2)).includes(denyCode), 'the consent page shows the second code');
      await noScript(page2, `consent page without JavaScript (${lang})`);
      await submitAndWait(page2, page2.getByRole('button', { name: t.deny }));
      assert.equal(new URL(page2.url()).searchParams.get('result'), 'denied');
      assert.equal(await h1(page2), t.deniedTitle);
      assert.match(await main(page2), t.denied);
      await page2.screenshot({ path: path.join(artifacts, `device-denied-${lang}.png`), fullPage: true });
      await noScript(page2, `device-denied-${lang}.png`);
      // axe-core needs JavaScript: the same page in the first context.
      await open(page, page2.url());
      assert.match(await main(page), t.denied);
      await axe(page, `device-denied-${lang}.png`);
      await noJS.close();
      await context.close();
    });
  }

  it('no script error', () => {
    assert.deepEqual(consoleErrors, []);
  });
});
