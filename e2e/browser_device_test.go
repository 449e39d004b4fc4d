package e2e

import (
	"net/url"
	"testing"
	"time"
)

// deviceScreenshots are the pages TestBrowserDeviceFlow captures.
var deviceScreenshots = []string{
	"device-en.png", "device-wrong-en.png", "device-consent-en.png", "device-approved-en.png", "device-denied-en.png",
	"device-de.png", "device-wrong-de.png", "device-consent-de.png", "device-approved-de.png", "device-denied-de.png",
}

// TestBrowserDeviceFlow drives the device flow's pages (RFC 8628) in
// headless Chromium, in English and German (e2e/browser/device.test.mjs):
// the code page prefilled from verification_uri_complete, a wrong code,
// the right code as a person types it, the sign-in, the consent page
// showing the code, Allow; then Deny for a second device in a browser with
// JavaScript turned off (signed in already, so the consent page follows
// the code). The devices' side is this test: it asks for the codes,
// polls before (authorization_pending) and after (tokens for the user who
// allowed, access_denied). Screenshots go to test-artifacts/browser/device/.
func TestBrowserDeviceFlow(t *testing.T) {
	root := requireBrowser(t)
	e := afStartEnv(t, nil)
	users := map[string]string{"EN": "dora", "DE": "dieter"}
	for _, u := range users {
		e.user(u, afPassword, false)
	}
	app := e.app(map[string]any{
		"name": "Living Room TV", "redirectUris": []string{},
		"grantTypes": []string{"OIDC_GRANT_TYPE_DEVICE_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":    "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE",
	})
	clientID := app["clientId"].(string)
	type device struct{ code, userCode, complete string }
	ask := func() device {
		t.Helper()
		st, res := postForm(t, e.base+"/oauth/v2/device_authorization", url.Values{"client_id": {clientID}, "scope": {"openid profile"}})
		if st != 200 {
			t.Fatalf("device authorization: %d %v", st, res)
		}
		d := device{}
		d.code, _ = res["device_code"].(string)
		d.userCode, _ = res["user_code"].(string)
		d.complete, _ = res["verification_uri_complete"].(string)
		if d.code == "" || !reUserCode.MatchString(d.userCode) || res["verification_uri"] != e.base+"/device" ||
			d.complete != e.base+"/device?user_code="+d.userCode || res["expires_in"] != 600.0 || res["interval"] != 5.0 {
			t.Fatalf("device authorization response: %v", res)
		}
		return d
	}
	poll := func(d device) (int, map[string]any) {
		return postForm(t, e.base+"/oauth/v2/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
			"device_code": {d.code}, "client_id": {clientID}})
	}
	keys := []string{"APPROVE_EN", "DENY_EN", "APPROVE_DE", "DENY_DE"}
	devices := map[string]device{}
	for _, k := range keys {
		devices[k] = ask()
		if st, res := poll(devices[k]); st != 400 || res["error"] != "authorization_pending" {
			t.Fatalf("%s before the browser: %d %v; want authorization_pending", k, st, res)
		}
	}
	polled := time.Now()

	artifacts := browserArtifacts(t, root, "device")
	runBrowserScript(t, root, "device.test.mjs", artifacts, 120*time.Second,
		"GATEHOUSE_BROWSER_ISSUER="+e.base,
		"GATEHOUSE_BROWSER_USER_EN="+users["EN"], "GATEHOUSE_BROWSER_USER_DE="+users["DE"],
		"GATEHOUSE_BROWSER_PASSWORD="+afPassword,
		"GATEHOUSE_BROWSER_APP=Living Room TV",
		"GATEHOUSE_BROWSER_APPROVE_EN="+devices["APPROVE_EN"].complete,
		"GATEHOUSE_BROWSER_DENY_EN="+devices["DENY_EN"].complete,
		"GATEHOUSE_BROWSER_APPROVE_DE="+devices["APPROVE_DE"].complete,
		"GATEHOUSE_BROWSER_DENY_DE="+devices["DENY_DE"].complete,
	)
	checkScreenshots(t, artifacts, deviceScreenshots)

	// The devices poll again, no sooner than the interval allows.
	if wait := 5*time.Second - time.Since(polled); wait > 0 {
		time.Sleep(wait + 100*time.Millisecond)
	}
	for _, lang := range []string{"EN", "DE"} {
		k := "APPROVE_" + lang
		st, res := poll(devices[k])
		idToken, _ := res["id_token"].(string)
		if st != 200 || idToken == "" || res["access_token"] == nil || res["token_type"] != "Bearer" {
			t.Errorf("%s: %d %v; want tokens", k, st, res)
			continue
		}
		if _, claims := jwtParts(t, idToken); claims["sub"] != e.users[users[lang]] || !hasAud(claims["aud"], clientID) {
			t.Errorf("%s: ID token sub %v aud %v; want %s (%s) for %s", k, claims["sub"], claims["aud"], e.users[users[lang]], users[lang], clientID)
		}
	}
	for _, k := range []string{"DENY_EN", "DENY_DE"} {
		if st, res := poll(devices[k]); st != 400 || res["error"] != "access_denied" {
			t.Errorf("%s: %d %v; want access_denied", k, st, res)
		}
	}
}

// hasAud reports whether a JWT's aud (a string or an array) names clientID.
func hasAud(aud any, clientID string) bool {
	if aud == clientID {
		return true
	}
	list, _ := aud.([]any)
	for _, a := range list {
		if a == clientID {
			return true
		}
	}
	return false
}
