package e2e

import (
	"net"
	"net/url"
	"testing"
	"time"
)

// resetScreenshots are the pages TestBrowserPasswordReset captures.
var resetScreenshots = []string{
	"loginname-en.png", "reset-en.png", "reset-sent-en.png", "reset-new-en.png", "reset-done-en.png",
	"loginname-de.png", "reset-de.png", "reset-sent-de.png", "reset-new-de.png", "reset-done-de.png",
}

// TestBrowserPasswordReset drives "Forgot password?" → mail → new password
// → sign-in in headless Chromium, in English and German, with mailpit as
// the SMTP server (e2e/browser/reset.test.mjs). Screenshots go to
// test-artifacts/browser/password-reset/.
func TestBrowserPasswordReset(t *testing.T) {
	root := requireBrowser(t)
	mp := startMailpit(t)
	e := afStartEnv(t, mp.env())
	e.user("rosa", afPassword, false)
	e.user("rudi", afPassword, false)
	_, rpPort, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://127.0.0.1:" + rpPort + "/cb"
	app := e.app(map[string]any{
		"name": "reset-web", "redirectUris": []string{redirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "devMode": true,
	})
	authorize := e.base + "/oauth/v2/authorize?" + url.Values{
		"client_id": {app["clientId"].(string)}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"s"}, "nonce": {"browser-nonce"},
	}.Encode()
	artifacts := browserArtifacts(t, root, "password-reset")
	runBrowserScript(t, root, "reset.test.mjs", artifacts, 120*time.Second,
		"GATEHOUSE_BROWSER_ISSUER="+e.base,
		"GATEHOUSE_BROWSER_AUTHORIZE_URL="+authorize,
		"GATEHOUSE_BROWSER_REDIRECT_URI="+redirect,
		"GATEHOUSE_BROWSER_MAILPIT="+mp.api,
		"GATEHOUSE_BROWSER_USER_EN=rosa",
		"GATEHOUSE_BROWSER_USER_DE=rudi",
	)
	checkScreenshots(t, artifacts, resetScreenshots)
}
