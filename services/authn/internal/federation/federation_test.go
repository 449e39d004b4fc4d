package federation

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
)

// fakeOP is a minimal OpenID Provider whose answers a test bends: the ID
// token's claims and signing key, the token endpoint's status, the
// discovery document's issuer and auth methods.
type fakeOP struct {
	srv        *httptest.Server
	key, other *ecdsa.PrivateKey
	claims     map[string]any
	signWith   *ecdsa.PrivateKey
	status     int
	issuer     string // in discovery; "" = the server's URL
	methods    []string
	issParam   bool   // discovery promises iss in authorization responses
	gotAuth    string // how the client authenticated: basic or post
}

func newFakeOP(t *testing.T) *fakeOP {
	t.Helper()
	op := &fakeOP{status: 200, methods: []string{"client_secret_basic", "client_secret_post"}}
	op.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	op.other, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	op.signWith = op.key
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss := op.issuer
		if iss == "" {
			iss = op.srv.URL
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "authorization_endpoint": op.srv.URL + "/auth",
			"token_endpoint": op.srv.URL + "/token", "jwks_uri": op.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"ES256"}, "token_endpoint_auth_methods_supported": op.methods,
			"authorization_response_iss_parameter_supported": op.issParam})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &op.key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if _, _, ok := r.BasicAuth(); ok {
			op.gotAuth = "basic"
		} else if r.PostForm.Get("client_secret") != "" {
			op.gotAuth = "post"
		}
		if op.status != 200 {
			w.WriteHeader(op.status)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: op.signWith}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		payload, _ := json.Marshal(op.claims)
		sig, _ := signer.Sign(payload)
		idt, _ := sig.CompactSerialize()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": idt})
	})
	op.srv = httptest.NewServer(mux)
	t.Cleanup(op.srv.Close)
	return op
}

func (op *fakeOP) validClaims(nonce string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": op.srv.URL, "sub": "ext-1", "aud": "client", "exp": now.Add(time.Minute).Unix(),
		"iat": now.Unix(), "nonce": nonce, "preferred_username": "ext", "email": "ext@example.com", "email_verified": true,
		"name": "Ext Ernal", "amr": []string{"pwd", "mfa"}}
}

func TestFinish(t *testing.T) {
	ctx := context.Background()
	op := newFakeOP(t)
	rp := &RP{HTTP: netguard.Policy{AllowLoopback: true}.Client(netguard.Options{}), RedirectURL: "https://gh.example/idps/callback"}
	idp := &directoryv1.IdP{Id: "i", Issuer: op.srv.URL, ClientId: "client", Scopes: []string{"email"}}
	start, err := rp.Begin(ctx, idp, "secret")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(start.URL)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("nonce") != start.Nonce || q.Get("state") != start.State || q.Get("scope") != "openid email" {
		t.Fatalf("authorization URL %s", start.URL)
	}

	op.claims = op.validClaims(start.Nonce)
	id, err := rp.Finish(ctx, idp, "secret", url.Values{"code": {"code"}}, start.Verifier, start.Nonce)
	if err != nil || id.Subject != "ext-1" || !id.EmailVerified || len(id.AMR) != 2 || op.gotAuth != "basic" {
		t.Fatalf("Finish = %+v, %v (client auth %s)", id, err, op.gotAuth)
	}

	for name, tc := range map[string]struct {
		bend func()
		want error
	}{
		"wrong nonce":         {func() { op.claims["nonce"] = "other" }, ErrInvalidToken},
		"wrong audience":      {func() { op.claims["aud"] = "someone-else" }, ErrInvalidToken},
		"wrong issuer":        {func() { op.claims["iss"] = "https://evil.example" }, ErrInvalidToken},
		"expired":             {func() { op.claims["exp"] = time.Now().Add(-time.Hour).Unix() }, ErrInvalidToken},
		"foreign signature":   {func() { op.signWith = op.other }, ErrInvalidToken},
		"client refused":      {func() { op.status = 401 }, ErrRejected},
		"token endpoint down": {func() { op.status = 503 }, ErrUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			op.claims, op.signWith, op.status = op.validClaims(start.Nonce), op.key, 200
			tc.bend()
			if _, err := rp.Finish(ctx, idp, "secret", url.Values{"code": {"code"}}, start.Verifier, start.Nonce); !errors.Is(err, tc.want) {
				t.Errorf("Finish = %v; want %v", err, tc.want)
			}
		})
	}
}

// RFC 9207: an authorization response naming another issuer is refused
// before its code goes anywhere, and so is one without iss from a
// provider whose discovery promises it.
func TestAuthorizationResponseIssuer(t *testing.T) {
	ctx := context.Background()
	for _, promised := range []bool{false, true} {
		op := newFakeOP(t)
		op.issParam = promised
		rp := &RP{HTTP: netguard.Policy{AllowLoopback: true}.Client(netguard.Options{}), RedirectURL: "https://gh.example/idps/callback"}
		idp := &directoryv1.IdP{Id: "i", Issuer: op.srv.URL, ClientId: "client"}
		start, err := rp.Begin(ctx, idp, "secret")
		if err != nil {
			t.Fatal(err)
		}
		op.claims = op.validClaims(start.Nonce)
		for _, tc := range []struct {
			name     string
			response url.Values
			want     error
		}{
			{"another issuer", url.Values{"code": {"code"}, "iss": {"https://evil.example"}}, ErrMixUp},
			{"an empty iss", url.Values{"code": {"code"}, "iss": {""}}, ErrMixUp},
			{"the issuer", url.Values{"code": {"code"}, "iss": {op.srv.URL}}, nil},
			{"no iss", url.Values{"code": {"code"}}, map[bool]error{false: nil, true: ErrMixUp}[promised]},
		} {
			op.gotAuth = ""
			_, err := rp.Finish(ctx, idp, "secret", tc.response, start.Verifier, start.Nonce)
			if !errors.Is(err, tc.want) || (tc.want != nil && err == nil) {
				t.Errorf("discovery promises iss: %v, %s: %v; want %v", promised, tc.name, err, tc.want)
			}
			if tc.want != nil && op.gotAuth != "" {
				t.Errorf("discovery promises iss: %v, %s: the code was sent to the token endpoint", promised, tc.name)
			}
		}
	}
}

func TestDiscovery(t *testing.T) {
	ctx := context.Background()
	op := newFakeOP(t)
	idp := &directoryv1.IdP{Id: "i", Issuer: op.srv.URL, ClientId: "client"}
	// client_secret_post when discovery lists only that.
	op.methods = []string{"client_secret_post"}
	rp := &RP{HTTP: netguard.Policy{AllowLoopback: true}.Client(netguard.Options{}), RedirectURL: "https://gh.example/idps/callback"}
	start, err := rp.Begin(ctx, idp, "secret")
	if err != nil {
		t.Fatal(err)
	}
	op.claims = op.validClaims(start.Nonce)
	if _, err := rp.Finish(ctx, idp, "secret", url.Values{"code": {"code"}}, start.Verifier, start.Nonce); err != nil || op.gotAuth != "post" {
		t.Fatalf("Finish = %v with %s; want client_secret_post", err, op.gotAuth)
	}
	// A document naming another issuer is refused.
	op.issuer = "https://other.example"
	rp2 := &RP{HTTP: netguard.Policy{AllowLoopback: true}.Client(netguard.Options{})}
	if _, err := rp2.Begin(ctx, idp, "secret"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("issuer mismatch: %v; want ErrUnavailable", err)
	}
	// Loopback refused by the default policy: discovery never happens.
	rp3 := &RP{HTTP: netguard.Policy{}.Client(netguard.Options{})}
	if _, err := rp3.Begin(ctx, idp, "secret"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("loopback provider: %v; want ErrUnavailable", err)
	}
}
