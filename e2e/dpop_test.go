package e2e

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// dpopKey is a client's DPoP key: it signs proofs (RFC 9449 §4) with its
// public key in the header.
type dpopKey struct {
	t   *testing.T
	key crypto.Signer
	alg jose.SignatureAlgorithm
}

func newDPoPKey(t *testing.T) *dpopKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &dpopKey{t: t, key: k, alg: jose.ES256}
}

// jkt is the key's RFC 7638 thumbprint, base64url.
func (k *dpopKey) jkt() string {
	k.t.Helper()
	tp, err := (&jose.JSONWebKey{Key: k.key.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		k.t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// proof signs a proof for method and u; edit changes the claims, header
// the protected header (nil for the default: typ dpop+jwt, the public jwk).
func (k *dpopKey) proof(method, u string, edit func(map[string]any), header map[jose.HeaderKey]any) string {
	k.t.Helper()
	claims := map[string]any{"jti": base64.RawURLEncoding.EncodeToString(randomBytes(k.t, 12)), "htm": method, "htu": u,
		"iat": time.Now().Unix()}
	if edit != nil {
		edit(claims)
	}
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
	for hk, v := range header {
		opts = opts.WithHeader(hk, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.key}, opts)
	if err != nil {
		k.t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		k.t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func ath(token string) string {
	h := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// dpopResponse is an HTTP answer, read whole.
type dpopResponse struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func dpopDo(t *testing.T, req *http.Request, proofs ...string) dpopResponse {
	t.Helper()
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := dpopResponse{status: res.StatusCode, header: res.Header, raw: string(b)}
	_ = json.Unmarshal(b, &out.body)
	return out
}

func dpopPost(t *testing.T, u string, form url.Values, basic [2]string, proofs ...string) dpopResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic[0] != "" {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	return dpopDo(t, req, proofs...)
}

// dpopApp is a public client (PKCE, refresh tokens) whose access tokens
// are of typ (OIDC_TOKEN_TYPE_JWT or _BEARER, opaque).
func (e *afEnv) dpopApp(name, typ string) string {
	e.t.Helper()
	app := e.app(map[string]any{
		"name": name, "redirectUris": []string{afRedirect},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":       "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "accessTokenType": typ,
	})
	return app["clientId"].(string)
}

// dpopCode signs alice in for clientID and returns a code and its
// verifier; extra are more authorization request parameters (pairs).
func (e *afEnv) dpopCode(clientID string, extra ...string) (code, verifier string) {
	e.t.Helper()
	verifier = base64.RawURLEncoding.EncodeToString(randomBytes(e.t, 32))
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"client_id": {clientID}, "redirect_uri": {afRedirect}, "response_type": {"code"},
		"scope": {"openid profile offline_access"}, "state": {"s-dpop"}, "nonce": {"n-dpop"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	c := browser(e.t, e.base)
	p := e.password(c, afGet(e.t, c, e.base+"/oauth/v2/authorize?"+q.Encode()), "alice", afPassword)
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		e.t.Fatalf("want a code redirect; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	return p.loc.Query().Get("code"), verifier
}

// TestDPoP binds tokens to a client's key (RFC 9449) through the public
// endpoints: token_type DPoP, cnf.jkt in the JWT access token and in
// introspection (opaque tokens too), userinfo with the DPoP scheme and
// a proof, a bound token refused as a bearer token and with another
// key's proof, a public client's refresh token usable only with its key,
// and every proof rule refused with invalid_dpop_proof, changing nothing.
func TestDPoP(t *testing.T) {
	t.Parallel()
	e := afStart(t)
	tokenURL, userinfoURL := e.base+"/oauth/v2/token", e.base+"/oidc/v1/userinfo"
	key, other := newDPoPKey(t), newDPoPKey(t)

	doc := dpopDo(t, mustRequest(t, http.MethodGet, e.base+"/.well-known/openid-configuration"))
	if algs, _ := doc.body["dpop_signing_alg_values_supported"].([]any); len(algs) != 4 {
		t.Fatalf("dpop_signing_alg_values_supported %v; want ES256, RS256, PS256, EdDSA", doc.body["dpop_signing_alg_values_supported"])
	}

	jwtApp := e.dpopApp("dpop-jwt", "OIDC_TOKEN_TYPE_JWT")
	code, verifier := e.dpopCode(jwtApp)
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {afRedirect},
		"client_id": {jwtApp}, "code_verifier": {verifier}}

	// Every proof rule: refused with invalid_dpop_proof, and the code is
	// still good afterwards (a refused proof changes nothing).
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	replayed := key.proof("POST", tokenURL, nil, nil)
	if r := dpopPost(t, e.base+"/oauth/v2/introspect", url.Values{"token": {"x"}}, [2]string{e.apiID, e.apiSecret}, replayed); r.status != 200 {
		t.Fatalf("introspection with a DPoP header: %d %s", r.status, r.raw) // endpoints without DPoP ignore the header
	}
	// One use of the proof at the token endpoint (a failed grant: an unknown code).
	if r := dpopPost(t, tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {"nope"}, "redirect_uri": {afRedirect},
		"client_id": {jwtApp}, "code_verifier": {verifier}}, [2]string{}, replayed); r.body["error"] != "invalid_grant" {
		t.Fatalf("unknown code with a good proof: %d %s", r.status, r.raw)
	}
	bad := map[string][]string{
		"wrong htm":      {key.proof("GET", tokenURL, nil, nil)},
		"wrong htu":      {key.proof("POST", e.base+"/oauth/v2/introspect", nil, nil)},
		"old iat":        {key.proof("POST", tokenURL, func(c map[string]any) { c["iat"] = time.Now().Add(-5 * time.Minute).Unix() }, nil)},
		"future iat":     {key.proof("POST", tokenURL, func(c map[string]any) { c["iat"] = time.Now().Add(5 * time.Minute).Unix() }, nil)},
		"no jti":         {key.proof("POST", tokenURL, func(c map[string]any) { delete(c, "jti") }, nil)},
		"replayed jti":   {replayed},
		"ath at token":   {key.proof("POST", tokenURL, func(c map[string]any) { c["ath"] = ath("x") }, nil)},
		"typ JWT":        {key.proof("POST", tokenURL, nil, map[jose.HeaderKey]any{"typ": "JWT"})},
		"private jwk":    {key.proof("POST", tokenURL, nil, map[jose.HeaderKey]any{"jwk": privateJWK(t, key.key)})},
		"another jwk":    {key.proof("POST", tokenURL, nil, map[jose.HeaderKey]any{"jwk": &jose.JSONWebKey{Key: other.key.Public()}})},
		"symmetric alg":  {hsProof(t, tokenURL)},
		"two headers":    {key.proof("POST", tokenURL, nil, nil), key.proof("POST", tokenURL, nil, nil)},
		"not a jwt":      {"not.a.proof"},
		"ed25519 as RS":  {(&dpopKey{t: t, key: edPriv, alg: jose.EdDSA}).proof("POST", tokenURL, nil, map[jose.HeaderKey]any{"alg": "RS256"})},
		"short rsa":      {shortRSAProof(t, tokenURL)},
		"rsa with ES256": {(&dpopKey{t: t, key: rsaKey, alg: jose.RS256}).proof("POST", tokenURL, nil, map[jose.HeaderKey]any{"alg": "ES256"})},
	}
	for name, proofs := range bad {
		r := dpopPost(t, tokenURL, exchange, [2]string{}, proofs...)
		if r.status != 400 || r.body["error"] != "invalid_dpop_proof" {
			t.Errorf("%s: %d %s; want 400 invalid_dpop_proof", name, r.status, r.raw)
		}
	}

	res := dpopPost(t, tokenURL, exchange, [2]string{}, key.proof("POST", tokenURL, nil, nil))
	if res.status != 200 || res.body["token_type"] != "DPoP" {
		t.Fatalf("code exchange with a proof: %d %s; want token_type DPoP", res.status, res.raw)
	}
	at, rt := res.body["access_token"].(string), res.body["refresh_token"].(string)
	if cnf := jwtClaims(t, at)["cnf"]; cnf == nil || cnf.(map[string]any)["jkt"] != key.jkt() {
		t.Fatalf("access token cnf %v; want jkt %s", cnf, key.jkt())
	}
	e.dpopIntrospect(at, key.jkt())

	userinfo := func(scheme, token string, proofs ...string) dpopResponse {
		req := mustRequest(t, http.MethodGet, userinfoURL)
		req.Header.Set("Authorization", scheme+" "+token)
		return dpopDo(t, req, proofs...)
	}
	if r := userinfo("DPoP", at, key.proof("GET", userinfoURL, func(c map[string]any) { c["ath"] = ath(at) }, nil)); r.status != 200 || r.body["sub"] == nil {
		t.Fatalf("userinfo with the DPoP scheme and a proof: %d %s", r.status, r.raw)
	}
	r := userinfo("Bearer", at)
	if r.status != 401 || !challenged(r, `DPoP `, `error="invalid_token"`) {
		t.Fatalf("bound token as a bearer token: %d %v %s; want 401 with a DPoP invalid_token challenge", r.status, r.header["Www-Authenticate"], r.raw)
	}
	if r := userinfo("DPoP", at, other.proof("GET", userinfoURL, func(c map[string]any) { c["ath"] = ath(at) }, nil)); r.status != 401 || r.body["error"] != "invalid_token" {
		t.Fatalf("another key's proof: %d %s; want 401 invalid_token", r.status, r.raw)
	}
	if r := userinfo("DPoP", at, key.proof("GET", userinfoURL, func(c map[string]any) { c["ath"] = ath("another token") }, nil)); r.status != 401 ||
		r.body["error"] != "invalid_dpop_proof" || !challenged(r, `DPoP `, `error="invalid_dpop_proof"`) {
		t.Fatalf("wrong ath: %d %v %s; want 401 invalid_dpop_proof with a DPoP challenge", r.status, r.header["Www-Authenticate"], r.raw)
	}
	if r := userinfo("DPoP", at); r.status != 400 && r.status != 401 {
		t.Fatalf("DPoP scheme without a proof: %d %s", r.status, r.raw)
	}

	// The public client's refresh token: its key only.
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {jwtApp}}
	for name, proofs := range map[string][]string{"no proof": nil, "another key": {other.proof("POST", tokenURL, nil, nil)}} {
		if r := dpopPost(t, tokenURL, refresh, [2]string{}, proofs...); r.status != 400 || r.body["error"] != "invalid_grant" {
			t.Fatalf("refresh with %s: %d %s; want invalid_grant", name, r.status, r.raw)
		}
	}
	res = dpopPost(t, tokenURL, refresh, [2]string{}, key.proof("POST", tokenURL, nil, nil))
	if res.status != 200 || res.body["token_type"] != "DPoP" {
		t.Fatalf("refresh with the key (after refusals, which must not count as reuse): %d %s", res.status, res.raw)
	}
	if r := dpopPost(t, tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {res.body["refresh_token"].(string)},
		"client_id": {jwtApp}}, [2]string{}, other.proof("POST", tokenURL, nil, nil)); r.body["error"] != "invalid_grant" {
		t.Fatalf("the rotated refresh token with another key: %d %s; want invalid_grant (the binding is kept)", r.status, r.raw)
	}

	// Opaque access tokens carry the binding in storage.
	opaqueApp := e.dpopApp("dpop-opaque", "OIDC_TOKEN_TYPE_BEARER")
	code, verifier = e.dpopCode(opaqueApp)
	res = dpopPost(t, tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {afRedirect},
		"client_id": {opaqueApp}, "code_verifier": {verifier}}, [2]string{}, key.proof("POST", tokenURL, nil, nil))
	if res.status != 200 || res.body["token_type"] != "DPoP" || strings.Count(res.body["access_token"].(string), ".") == 2 {
		t.Fatalf("opaque code exchange with a proof: %d %s", res.status, res.raw)
	}
	opaque := res.body["access_token"].(string)
	e.dpopIntrospect(opaque, key.jkt())
	if r := userinfo("Bearer", opaque); r.status != 401 || !challenged(r, `DPoP `, `error="invalid_token"`) {
		t.Fatalf("bound opaque token as a bearer token: %d %s", r.status, r.raw)
	}
	if r := userinfo("DPoP", opaque, key.proof("GET", userinfoURL, func(c map[string]any) { c["ath"] = ath(opaque) }, nil)); r.status != 200 {
		t.Fatalf("opaque token with its proof: %d %s", r.status, r.raw)
	}

	// Without a proof nothing changes: a bearer token, unbound.
	code, verifier = e.dpopCode(opaqueApp)
	res = dpopPost(t, tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {afRedirect},
		"client_id": {opaqueApp}, "code_verifier": {verifier}}, [2]string{})
	if res.status != 200 || res.body["token_type"] != "Bearer" {
		t.Fatalf("code exchange without a proof: %d %s", res.status, res.raw)
	}
	if r := userinfo("DPoP", res.body["access_token"].(string), key.proof("GET", userinfoURL,
		func(c map[string]any) { c["ath"] = ath(res.body["access_token"].(string)) }, nil)); r.status != 401 {
		t.Fatalf("a bearer token with the DPoP scheme: %d %s; want 401", r.status, r.raw)
	}
}

// TestDPoPNonce: with GATEHOUSE_DPOP_REQUIRE_NONCE the token endpoint and
// userinfo answer use_dpop_nonce with a DPoP-Nonce header until the proof
// carries it (RFC 9449 §8, §9).
func TestDPoPNonce(t *testing.T) {
	t.Parallel()
	e := afStartEnv(t, map[string]string{"GATEHOUSE_DPOP_REQUIRE_NONCE": "true"})
	tokenURL, userinfoURL := e.base+"/oauth/v2/token", e.base+"/oidc/v1/userinfo"
	key := newDPoPKey(t)
	app := e.dpopApp("dpop-nonce", "OIDC_TOKEN_TYPE_JWT")
	code, verifier := e.dpopCode(app)
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {afRedirect},
		"client_id": {app}, "code_verifier": {verifier}}
	r := dpopPost(t, tokenURL, exchange, [2]string{}, key.proof("POST", tokenURL, nil, nil))
	nonce := r.header.Get("DPoP-Nonce")
	if r.status != 400 || r.body["error"] != "use_dpop_nonce" || nonce == "" {
		t.Fatalf("proof without a nonce: %d %v %s; want 400 use_dpop_nonce with DPoP-Nonce", r.status, r.header, r.raw)
	}
	if r := dpopPost(t, tokenURL, exchange, [2]string{}, key.proof("POST", tokenURL, func(c map[string]any) { c["nonce"] = "made-up" }, nil)); r.body["error"] != "use_dpop_nonce" {
		t.Fatalf("a made-up nonce: %d %s", r.status, r.raw)
	}
	r = dpopPost(t, tokenURL, exchange, [2]string{}, key.proof("POST", tokenURL, func(c map[string]any) { c["nonce"] = nonce }, nil))
	if r.status != 200 || r.body["token_type"] != "DPoP" {
		t.Fatalf("proof with the nonce: %d %s", r.status, r.raw)
	}
	at := r.body["access_token"].(string)
	req := mustRequest(t, http.MethodGet, userinfoURL)
	req.Header.Set("Authorization", "DPoP "+at)
	u := dpopDo(t, req, key.proof("GET", userinfoURL, func(c map[string]any) { c["ath"] = ath(at) }, nil))
	if u.status != 401 || !challenged(u, `DPoP `, `error="use_dpop_nonce"`) || u.header.Get("DPoP-Nonce") == "" {
		t.Fatalf("userinfo proof without a nonce: %d %v; want 401 use_dpop_nonce", u.status, u.header)
	}
	req = mustRequest(t, http.MethodGet, userinfoURL)
	req.Header.Set("Authorization", "DPoP "+at)
	u = dpopDo(t, req, key.proof("GET", userinfoURL, func(c map[string]any) { c["ath"], c["nonce"] = ath(at), u.header.Get("DPoP-Nonce") }, nil))
	if u.status != 200 {
		t.Fatalf("userinfo proof with the nonce: %d %s", u.status, u.raw)
	}
}

// dpopIntrospect checks that introspection reports token as DPoP-bound to jkt.
func (e *afEnv) dpopIntrospect(token, jkt string) {
	e.t.Helper()
	r := dpopPost(e.t, e.base+"/oauth/v2/introspect", url.Values{"token": {token}}, [2]string{e.apiID, e.apiSecret})
	cnf, _ := r.body["cnf"].(map[string]any)
	if r.status != 200 || r.body["active"] != true || r.body["token_type"] != "DPoP" || cnf["jkt"] != jkt {
		e.t.Fatalf("introspection of a bound token: %d %s; want active, token_type DPoP, cnf.jkt %s", r.status, r.raw, jkt)
	}
}

func challenged(r dpopResponse, parts ...string) bool {
	for _, c := range r.header.Values("WWW-Authenticate") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(c, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func mustRequest(t *testing.T, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// privateJWK is the private key as a JWK (a proof must carry the public one).
func privateJWK(t *testing.T, k crypto.Signer) *jose.JSONWebKey {
	t.Helper()
	return &jose.JSONWebKey{Key: k, Algorithm: "ES256"}
}

// hsProof is a proof MACed with HS256 (a symmetric alg).
func hsProof(t *testing.T, u string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
		(&jose.SignerOptions{}).WithType("dpop+jwt").WithHeader("jwk", map[string]string{"kty": "oct", "k": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"jti": "hs", "htm": "POST", "htu": u, "iat": time.Now().Unix()})
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := obj.CompactSerialize()
	return out
}

// shortRSAProof is a proof signed with a 1024-bit RSA key.
func shortRSAProof(t *testing.T, u string) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return (&dpopKey{t: t, key: k, alg: jose.RS256}).proof("POST", u, nil, nil)
}

// TestDPoPReplayAcrossReplicas: a proof used at one tokens replica is a
// replay at another (the replay store is Redis, shared), and a machine
// user's client_credentials tokens are bound like every grant's.
func TestDPoPReplayAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	e := rvStart(t, r, 0)
	second := startProc(t, config.RoleTokens, e.d.env(t.TempDir(), "GATEHOUSE_DIRECTORY_URL", e.d.directory.base))
	m := e.machine("dpop-replicas", "ACCESS_TOKEN_TYPE_JWT")
	key := newDPoPKey(t)
	tokenURL := e.issuer + "/oauth/v2/token" // htu: the public address, whichever replica answers
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}
	creds := [2]string{m.clientID, m.secret}
	p := key.proof("POST", tokenURL, nil, nil)
	res := dpopPost(t, e.edge.base+"/oauth/v2/token", form, creds, p)
	if res.status != 200 || res.body["token_type"] != "DPoP" {
		t.Fatalf("client_credentials with a proof through edge: %d %s", res.status, res.raw)
	}
	if cnf, _ := jwtClaims(t, res.body["access_token"].(string))["cnf"].(map[string]any); cnf["jkt"] != key.jkt() {
		t.Fatalf("cnf %v; want jkt %s", cnf, key.jkt())
	}
	if r := dpopPost(t, second.base+"/oauth/v2/token", form, creds, p); r.status != 400 || r.body["error"] != "invalid_dpop_proof" {
		t.Fatalf("the same proof at the second replica: %d %s; want invalid_dpop_proof (replayed)", r.status, r.raw)
	}
	if r := dpopPost(t, second.base+"/oauth/v2/token", form, creds, key.proof("POST", tokenURL, nil, nil)); r.status != 200 || r.body["token_type"] != "DPoP" {
		t.Fatalf("a new proof at the second replica: %d %s", r.status, r.raw)
	}
}

// TestDPoPReplayAcrossRestart: the embedded server remembers proofs in
// memory and keeps them through a clean restart, so a proof used before
// the restart is still a replay after it.
func TestDPoPReplayAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	env := map[string]string{"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e"}
	edge := startProc(t, config.RoleEdge, env)
	_, tok := operatorToken(t, edge.base, dir, issuer)
	admin := tok["access_token"].(string)
	status, mu := restJSON(t, "POST", edge.base+"/management/v1/users/machine", admin, map[string]any{"userName": "dpop-restart", "name": "dpop-restart"})
	if status != 200 {
		t.Fatalf("AddMachineUser: %d %v", status, mu)
	}
	status, sec := restJSON(t, "PUT", edge.base+"/management/v1/users/"+mu["userId"].(string)+"/secret", admin, map[string]any{})
	if status != 200 {
		t.Fatalf("GenerateMachineSecret: %d %v", status, sec)
	}
	creds := [2]string{sec["clientId"].(string), sec["clientSecret"].(string)}
	form := url.Values{"grant_type": {"client_credentials"}}
	key := newDPoPKey(t)
	p := key.proof("POST", issuer+"/oauth/v2/token", nil, nil)
	if r := dpopPost(t, edge.base+"/oauth/v2/token", form, creds, p); r.status != 200 || r.body["token_type"] != "DPoP" {
		t.Fatalf("first use: %d %s", r.status, r.raw)
	}
	edge.stop(t)
	edge = startProc(t, config.RoleEdge, env)
	if r := dpopPost(t, edge.base+"/oauth/v2/token", form, creds, p); r.status != 400 || r.body["error"] != "invalid_dpop_proof" {
		t.Fatalf("the proof again after a clean restart: %d %s; want invalid_dpop_proof", r.status, r.raw)
	}
	if r := dpopPost(t, edge.base+"/oauth/v2/token", form, creds, key.proof("POST", issuer+"/oauth/v2/token", nil, nil)); r.status != 200 {
		t.Fatalf("a new proof after the restart: %d %s", r.status, r.raw)
	}
}

// TestDPoPBoundApp: an app registered with dpopBoundAccessTokens (RFC
// 9449 §5.2) gets no token without a proof; the management API keeps and
// shows the setting, and refuses it beside the implicit grant.
func TestDPoPBoundApp(t *testing.T) {
	t.Parallel()
	e := afStart(t)
	tokenURL := e.base + "/oauth/v2/token"
	app := e.app(map[string]any{
		"name": "dpop-only", "redirectUris": []string{afRedirect},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":       "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "dpopBoundAccessTokens": true,
	})
	clientID := app["clientId"].(string)
	status, got := restJSON(t, "GET", e.base+"/management/v1/projects/"+e.projectID+"/apps/"+app["appId"].(string), e.admin, nil)
	if oidcCfg, _ := got["app"].(map[string]any)["oidcConfig"].(map[string]any); status != 200 || oidcCfg["dpopBoundAccessTokens"] != true {
		t.Fatalf("GetAppByID: %d %v; want dpopBoundAccessTokens true", status, got)
	}
	code, verifier := e.dpopCode(clientID)
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {afRedirect},
		"client_id": {clientID}, "code_verifier": {verifier}}
	if r := dpopPost(t, tokenURL, exchange, [2]string{}); r.status != 400 || r.body["error"] != "invalid_dpop_proof" {
		t.Fatalf("exchange without a proof: %d %s; want invalid_dpop_proof", r.status, r.raw)
	}
	key := newDPoPKey(t)
	if r := dpopPost(t, tokenURL, exchange, [2]string{}, key.proof("POST", tokenURL, nil, nil)); r.status != 200 || r.body["token_type"] != "DPoP" {
		t.Fatalf("exchange with a proof (the code survived the refusal): %d %s", r.status, r.raw)
	}
	status, bad := restJSON(t, "POST", e.base+"/management/v1/projects/"+e.projectID+"/apps/oidc", e.admin, map[string]any{
		"name": "dpop-implicit", "redirectUris": []string{afImplicitCB}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_IMPLICIT"}, "appType": "OIDC_APP_TYPE_USER_AGENT", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE",
		"dpopBoundAccessTokens": true})
	if status != 400 {
		t.Fatalf("dpopBoundAccessTokens with the implicit grant: %d %v; want 400", status, bad)
	}
}

// TestDPoPBoundCode binds the authorization code to a key (RFC 9449 §10):
// by dpop_jkt at the authorization endpoint, or by a proof with a pushed
// request; the code is redeemed only with a proof of that key, and a
// refusal leaves it good.
func TestDPoPBoundCode(t *testing.T) {
	t.Parallel()
	e := afStart(t)
	tokenURL, parURL := e.base+"/oauth/v2/token", e.base+"/oauth/v2/par"
	key, other := newDPoPKey(t), newDPoPKey(t)
	app := e.dpopApp("dpop-code", "OIDC_TOKEN_TYPE_JWT")
	redeem := func(code, verifier string, proofs ...string) dpopResponse {
		return dpopPost(t, tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {afRedirect},
			"client_id": {app}, "code_verifier": {verifier}}, [2]string{}, proofs...)
	}
	check := func(how, code, verifier string) {
		t.Helper()
		for name, proofs := range map[string][]string{"no proof": nil, "another key": {other.proof("POST", tokenURL, nil, nil)}} {
			if r := redeem(code, verifier, proofs...); r.status != 400 || r.body["error"] != "invalid_grant" {
				t.Errorf("%s, redeemed with %s: %d %s; want invalid_grant", how, name, r.status, r.raw)
			}
		}
		if r := redeem(code, verifier, key.proof("POST", tokenURL, nil, nil)); r.status != 200 || r.body["token_type"] != "DPoP" {
			t.Errorf("%s, redeemed with the key (after the refusals): %d %s", how, r.status, r.raw)
		}
	}
	code, verifier := e.dpopCode(app, "dpop_jkt", key.jkt())
	check("dpop_jkt", code, verifier)

	push := func(extra url.Values, proofs ...string) dpopResponse {
		v := url.Values{"client_id": {app}, "redirect_uri": {afRedirect}, "response_type": {"code"}, "scope": {"openid"},
			"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
		for k, vs := range extra {
			v[k] = vs
		}
		return dpopPost(t, parURL, v, [2]string{}, proofs...)
	}
	if r := push(nil, other.proof("POST", tokenURL, nil, nil)); r.status != 400 || r.body["error"] != "invalid_dpop_proof" {
		t.Errorf("PAR with a proof for another URL: %d %s; want invalid_dpop_proof", r.status, r.raw)
	}
	if r := push(url.Values{"dpop_jkt": {other.jkt()}}, key.proof("POST", parURL, nil, nil)); r.status != 400 || r.body["error"] != "invalid_dpop_proof" {
		t.Errorf("PAR with dpop_jkt of another key than the proof's: %d %s; want invalid_dpop_proof", r.status, r.raw)
	}
	r := push(nil, key.proof("POST", parURL, nil, nil))
	if r.status != 201 {
		t.Fatalf("PAR with a proof: %d %s", r.status, r.raw)
	}
	code, _ = e.dpopCode(app, "request_uri", r.body["request_uri"].(string))
	check("a pushed request's proof", code, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")

	// A malformed dpop_jkt is refused at the authorization endpoint.
	c := browser(t, e.base)
	p := afGet(t, c, e.base+"/oauth/v2/authorize?"+url.Values{"client_id": {app}, "redirect_uri": {afRedirect}, "response_type": {"code"},
		"scope": {"openid"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"},
		"dpop_jkt": {"not-a-thumbprint"}}.Encode())
	if p.loc == nil || p.loc.Query().Get("error") != "invalid_request" {
		t.Errorf("malformed dpop_jkt: %d %v; want an invalid_request redirect", p.status, p.loc)
	}
}
