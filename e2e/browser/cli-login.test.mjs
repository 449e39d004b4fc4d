// Browser half of the gatehouse CLI's sign-in, run by node's test runner
// from e2e/cli_browser_test.go (TestCLIBrowserLogin), which runs
// `gatehouse login --no-browser` and passes the URL it printed. Chromium
// signs the admin in on Gatehouse's login pages and follows the redirect
// to the CLI's loopback listener (http://127.0.0.1:<port>/callback).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through e2e/cli_browser_test.go`);
  return v;
}

const loginURL = env('GATEHOUSE_CLI_LOGIN_URL');
const loginName = env('GATEHOUSE_CLI_LOGIN_NAME');
const password = env('GATEHOUSE_CLI_PASSWORD');
const artifacts = env('GATEHOUSE_CLI_ARTIFACTS');
const executablePath = process.env.GATEHOUSE_BROWSER_CHROMIUM || '/usr/bin/chromium';

let browser;
let page;

describe('gatehouse login in Chromium', () => {
  before(async () => {
    browser = await chromium.launch({
      executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--disable-quic', '--no-first-run'],
    });
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 800, height: 640 } });
    page = await context.newPage();
  });
  after(async () => { await browser?.close(); });

  it('signs in and lands on the CLI loopback page', async () => {
    const u = new URL(loginURL);
    assert.equal(u.searchParams.get('client_id'), 'gatehouse-cli');
    assert.equal(u.searchParams.get('code_challenge_method'), 'S256');
    assert.match(u.searchParams.get('redirect_uri'), /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    await page.goto(loginURL);
    await page.getByLabel('Login name').fill(loginName);
    await Promise.all([page.waitForURL(/\/ui\/login\/password\?/), page.keyboard.press('Enter')]);
    await page.getByLabel('Password').fill(password);
    await Promise.all([page.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/), page.keyboard.press('Enter')]);
    await page.screenshot({ path: path.join(artifacts, 'cli-login-callback.png') });
    assert.match(await page.locator('main p').textContent(), /You are signed in to the gatehouse CLI/);
  });
});
