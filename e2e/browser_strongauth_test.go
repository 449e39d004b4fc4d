package e2e

import (
	"net"
	"net/url"
	"testing"
	"time"
)

// strongAuthScreenshots are the pages e2e/browser/strongauth.test.mjs
// must capture (each also passed axe-core).
var strongAuthScreenshots = []string{
	"account-en.png", "account-de.png", "account-passkey-en.png", "account-passkey-de.png", "account-codes-en.png",
	"account-key-en.png", "account-key-de.png", "account-password-en.png", "account-password-de.png",
	"account-totp-en.png", "account-totp-de.png", "passkey-en.png", "passkey-de.png", "loginname-passkey-en.png",
	"mfa-key-en.png", "mfa-key-de.png", "mfa-otp-en.png", "mfa-otp-de.png", "mfa-recovery-en.png", "mfa-recovery-de.png",
	"mfa-init-otp-en.png", "mfa-init-otp-de.png", "mfa-init-key-en.png", "mfa-init-key-de.png", "mfa-codes-en.png",
}

// TestBrowserStrongAuth drives passkeys, security keys, the second-factor
// pages and the account page in headless Chromium with the DevTools
// protocol's virtual authenticators (e2e/browser/strongauth.test.mjs).
// Screenshots go to test-artifacts/browser/strong-auth/.
func TestBrowserStrongAuth(t *testing.T) {
	root := requireBrowser(t)
	e := afStartLocalhost(t)
	e.user("bob-enrolls", afBobPass, false)
	// The relying party on localhost too: the same site as the issuer, so
	// Chromium keeps the tab's process at the redirect (the interception
	// answers it; the port is closed).
	_, rpPort, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://localhost:" + rpPort + "/cb"
	app := e.app(map[string]any{
		"name": "shop-web", "redirectUris": []string{redirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
	})
	e.loginPolicy(map[string]any{"passwordlessType": "PASSWORDLESS_TYPE_ALLOWED"})
	status, me := restJSON(t, "GET", e.base+"/management/v1/orgs/me", e.admin, nil)
	if status != 200 {
		t.Fatalf("GetMyOrg: %d %v", status, me)
	}
	authorize := e.base + "/oauth/v2/authorize?" + url.Values{
		"client_id": {app["clientId"].(string)}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"s"}, "nonce": {"browser-nonce"},
	}.Encode()
	artifacts := browserArtifacts(t, root, "strong-auth")
	runBrowserScript(t, root, "strongauth.test.mjs", artifacts, 120*time.Second,
		"GATEHOUSE_BROWSER_ISSUER="+e.base,
		"GATEHOUSE_BROWSER_AUTHORIZE_URL="+authorize,
		"GATEHOUSE_BROWSER_REDIRECT_URI="+redirect,
		"GATEHOUSE_BROWSER_ORG="+me["org"].(map[string]any)["id"].(string),
		"GATEHOUSE_BROWSER_ALICE=alice",
		"GATEHOUSE_BROWSER_ALICE_PASSWORD="+afPassword,
		"GATEHOUSE_BROWSER_BOB=bob-enrolls",
		"GATEHOUSE_BROWSER_BOB_PASSWORD="+afBobPass,
		"GATEHOUSE_BROWSER_ADMIN_TOKEN="+e.admin,
	)
	checkScreenshots(t, artifacts, strongAuthScreenshots)
}
