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
// the sign-in, the consent page showing the code, Allow, and Deny for a
// second device. The devices' side is this test: it asks for the codes and
// polls for the answers afterwards. Screenshots go to
// test-artifacts/browser/device/.
func TestBrowserDeviceFlow(t *testing.T) {
	root := requireBrowser(t)
	e := afStartEnv(t, nil)
	e.user("dora", afPassword, false)
	e.user("dieter", afPassword, false)
	app := e.app(map[string]any{
		"name": "Living Room TV", "redirectUris": []string{},
		"grantTypes": []string{"OIDC_GRANT_TYPE_DEVICE_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":    "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE",
	})
	clientID := app["clientId"].(string)
	type device struct{ code, complete string }
	ask := func() device {
		t.Helper()
		st, res := postForm(t, e.base+"/oauth/v2/device_authorization", url.Values{"client_id": {clientID}, "scope": {"openid profile"}})
		if st != 200 {
			t.Fatalf("device authorization: %d %v", st, res)
		}
		return device{res["device_code"].(string), res["verification_uri_complete"].(string)}
	}
	devices := map[string]device{}
	for _, k := range []string{"APPROVE_EN", "DENY_EN", "APPROVE_DE", "DENY_DE"} {
		devices[k] = ask()
	}
	artifacts := browserArtifacts(t, root, "device")
	runBrowserScript(t, root, "device.test.mjs", artifacts, 120*time.Second,
		"GATEHOUSE_BROWSER_ISSUER="+e.base,
		"GATEHOUSE_BROWSER_USER_EN=dora", "GATEHOUSE_BROWSER_USER_DE=dieter",
		"GATEHOUSE_BROWSER_PASSWORD="+afPassword,
		"GATEHOUSE_BROWSER_APPROVE_EN="+devices["APPROVE_EN"].complete,
		"GATEHOUSE_BROWSER_DENY_EN="+devices["DENY_EN"].complete,
		"GATEHOUSE_BROWSER_APPROVE_DE="+devices["APPROVE_DE"].complete,
		"GATEHOUSE_BROWSER_DENY_DE="+devices["DENY_DE"].complete,
	)
	checkScreenshots(t, artifacts, deviceScreenshots)
	poll := func(d device) (int, map[string]any) {
		return postForm(t, e.base+"/oauth/v2/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
			"device_code": {d.code}, "client_id": {clientID}})
	}
	for _, k := range []string{"APPROVE_EN", "APPROVE_DE"} {
		if st, res := poll(devices[k]); st != 200 || res["id_token"] == nil {
			t.Errorf("%s: %d %v; want tokens", k, st, res)
		}
	}
	for _, k := range []string{"DENY_EN", "DENY_DE"} {
		if st, res := poll(devices[k]); st != 400 || res["error"] != "access_denied" {
			t.Errorf("%s: %d %v; want access_denied", k, st, res)
		}
	}
}
