package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// fakeOP is an OpenID Provider that asserts whatever a test sets: the
// attacker's provider of the security tests (or a victim's real one). Its
// authorization endpoint answers at once (no login page) with a code for
// the identity set now; its token endpoint authenticates the client
// (client_secret_basic) and returns an ID token signed with its own key.
type fakeOP struct {
	issuer, clientID, secret string

	mu     sync.Mutex
	claims map[string]any
	codes  map[string]fakeGrant
	key    jwk.Key
	public jwk.Set
}

type fakeGrant struct {
	nonce  string
	claims map[string]any
}

func startFakeOP(t *testing.T, claims map[string]any) *fakeOP {
	t.Helper()
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "fake-op")
	_ = key.Set(jwk.AlgorithmKey, jwa.RS256())
	pub, err := jwk.PublicKeyOf(key)
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	op := &fakeOP{issuer: "http://" + ln.Addr().String(), clientID: "gatehouse", secret: "fake-op-secret-" + rand.Text(),
		claims: claims, codes: map[string]fakeGrant{}, key: key, public: set}
	srv := &http.Server{Handler: op.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return op
}

// assert sets the identity the next sign-ins get.
func (op *fakeOP) assert(claims map[string]any) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.claims = claims
}

// config is the body of AddOrgOIDCIDP or UpdateOrgIDPOIDCConfig for op.
func (op *fakeOP) config(extra map[string]any) map[string]any {
	out := map[string]any{"issuer": op.issuer, "clientId": op.clientID, "clientSecret": op.secret,
		"scopes": []string{"openid", "profile", "email"}}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func (op *fakeOP) routes() http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": op.issuer, "authorization_endpoint": op.issuer + "/authorize", "token_endpoint": op.issuer + "/token",
			"jwks_uri": op.issuer + "/keys", "response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
			"authorization_response_iss_parameter_supported": true,
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, op.public) })
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != op.clientID {
			http.Error(w, "unknown client", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		op.mu.Lock()
		op.codes[code] = fakeGrant{nonce: q.Get("nonce"), claims: op.claims}
		op.mu.Unlock()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		v := back.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		v.Set("iss", op.issuer)
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || id != op.clientID || secret != op.secret {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]string{"error": "invalid_client"})
			return
		}
		op.mu.Lock()
		g, found := op.codes[r.PostFormValue("code")]
		delete(op.codes, r.PostFormValue("code"))
		op.mu.Unlock()
		if !found {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant"})
			return
		}
		now := time.Now()
		b := jwt.NewBuilder().Issuer(op.issuer).Audience([]string{op.clientID}).IssuedAt(now).Expiration(now.Add(5*time.Minute)).
			Claim("nonce", g.nonce)
		for k, v := range g.claims {
			b = b.Claim(k, v)
		}
		tok, err := b.Build()
		if err == nil {
			var signed []byte
			hdr := jws.NewHeaders()
			_ = hdr.Set(jws.KeyIDKey, "fake-op")
			if signed, err = jwt.Sign(tok, jwt.WithKey(jwa.RS256(), op.key, jws.WithProtectedHeaders(hdr))); err == nil {
				writeJSON(w, map[string]any{"access_token": rand.Text(), "token_type": "Bearer", "expires_in": 300, "id_token": string(signed)})
				return
			}
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
	})
	return mux
}
