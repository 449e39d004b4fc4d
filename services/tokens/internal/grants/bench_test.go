package grants_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// serve runs one token request through the handler in-process (server
// CPU only) and returns the decoded response.
func serve(b *testing.B, h http.Handler, c *tokentest.Client, form url.Values) *tokens {
	req := httptest.NewRequest(http.MethodPost, "/oauth/v2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.GetClientId()), url.QueryEscape(c.Secret))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var tk tokens
	if err := json.Unmarshal(rec.Body.Bytes(), &tk); err != nil {
		b.Fatal(err)
	}
	return &tk
}

// BenchmarkExchangeCode is the authorization_code grant on SQLite with
// ES256 (JWT access token and ID token, refresh token), creating each
// code outside the timer.
func BenchmarkExchangeCode(b *testing.B) {
	f := newFixture(b, "sqlite", options{Options: tokentest.Options{Algorithm: keys.ES256}})
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		res, err := f.life.CreateAuthorizationCode(ctx, f.codeRequest(login{client: f.basic}))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		serve(b, f.handler, f.basic, url.Values{"grant_type": {"authorization_code"}, "code": {res.GetCode()},
			"redirect_uri": {redirectURI}})
	}
}

// BenchmarkRefresh rotates one refresh token chain on SQLite with ES256
// (JWT access token and ID token).
func BenchmarkRefresh(b *testing.B) {
	f := newFixture(b, "sqlite", options{Options: tokentest.Options{Algorithm: keys.ES256}})
	tk := f.start(b, f.basic, "s")
	for b.Loop() {
		tk = serve(b, f.handler, f.basic, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}})
	}
}

// BenchmarkCreateAuthorizationCode is the internal procedure authn calls
// at the end of every login (in-process, SQLite).
func BenchmarkCreateAuthorizationCode(b *testing.B) {
	f := newFixture(b, "sqlite", options{Options: tokentest.Options{Algorithm: keys.ES256}})
	ctx := context.Background()
	req := f.codeRequest(login{client: f.basic})
	for b.Loop() {
		if _, err := f.life.CreateAuthorizationCode(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
