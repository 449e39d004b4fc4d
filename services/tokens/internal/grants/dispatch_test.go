package grants_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
)

// The dispatcher authenticates the client and checks that it may use the
// grant before the grant reads a parameter: a request without credentials
// is invalid_client, an ineligible client unauthorized_client, whatever
// else the request lacks. The jwt-bearer grant authenticates by its
// assertion, so its own parameters are checked first.
func TestDispatcherAuthenticatesBeforeTheGrant(t *testing.T) {
	t.Parallel()
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		anonymous := func(grantType string) *tokentest.Response {
			return tokentest.Call(t, http.MethodPost, f.base+"/oauth/v2/token", url.Values{"grant_type": {grantType}}, nil)
		}
		for _, g := range []string{"authorization_code", "refresh_token", "client_credentials"} {
			wantError(t, anonymous(g), http.StatusBadRequest, "invalid_client") // 401 only when Basic was tried
		}
		res := anonymous("urn:ietf:params:oauth:grant-type:jwt-bearer")
		wantError(t, res, http.StatusBadRequest, "invalid_request")
		if d := res.JSON(t)["error_description"]; d != "assertion is required" {
			t.Fatalf("jwt-bearer without an assertion: %v", d)
		}
		for _, tc := range []struct {
			client    *tokentest.Client
			grantType string
		}{
			{f.robot, "authorization_code"}, // a machine user
			{f.robot, "refresh_token"},
			{f.basic, "client_credentials"}, // an OIDC app
			{f.noRefresh, "refresh_token"},  // not registered for it
		} {
			res := f.token(t, tc.client, url.Values{"grant_type": {tc.grantType}})
			wantError(t, res, http.StatusBadRequest, "unauthorized_client")
			if d := res.JSON(t)["error_description"]; d != "the client may not use the "+tc.grantType+" grant" {
				t.Fatalf("%s asking %s: %v", tc.client.GetClientId(), tc.grantType, d)
			}
		}
		// A hint says how to fix it, beside the description.
		res = f.token(t, f.noRefresh, url.Values{"grant_type": {"refresh_token"}})
		if h := res.JSON(t)["error_hint"]; h != "add refresh_token to the application's grant types" {
			t.Fatalf("hint %v", h)
		}
		res = f.token(t, f.basic, url.Values{})
		if h := res.JSON(t)["error_hint"]; h != "send grant_type: one of authorization_code, client_credentials, refresh_token, urn:ietf:params:oauth:grant-type:device_code, urn:ietf:params:oauth:grant-type:jwt-bearer, urn:ietf:params:oauth:grant-type:token-exchange" {
			t.Fatalf("hint %v", h)
		}
		// Eligible and authenticated: now the grant's parameters.
		res = f.token(t, f.basic, url.Values{"grant_type": {"authorization_code"}, "redirect_uri": {redirectURI}})
		wantError(t, res, http.StatusBadRequest, "invalid_request")
		if d := res.JSON(t)["error_description"]; d != "code is required" {
			t.Fatalf("code missing: %v", d)
		}
	})
}
