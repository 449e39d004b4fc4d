package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jarApp is a confidential web app authenticating with private_key_jwt,
// with the RSA key the test holds registered under kid.
type jarApp struct {
	clientID, kid string
	key           *rsa.PrivateKey
}

// addKeyedApp registers an OIDC web app of projectID (private_key_jwt,
// redirect) and a key for it; extra fields are merged into the request.
func addKeyedApp(t *testing.T, base, admin, projectID, name, redirect string, extra map[string]any) jarApp {
	t.Helper()
	body := map[string]any{"name": name, "redirectUris": []string{redirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT", "devMode": true}
	for k, v := range extra {
		body[k] = v
	}
	status, app := restJSON(t, "POST", base+"/management/v1/projects/"+projectID+"/apps/oidc", admin, body)
	if status != 200 {
		t.Fatalf("AddOIDCApp %s: %d %v", name, status, app)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	status, k := restJSON(t, "POST", base+"/management/v1/projects/"+projectID+"/apps/"+app["appId"].(string)+"/keys", admin,
		map[string]any{"type": "KEY_TYPE_JSON", "publicKey": base64.StdEncoding.EncodeToString(pemKey)})
	if status != 200 {
		t.Fatalf("AddAppKey: %d %v", status, k)
	}
	return jarApp{clientID: app["clientId"].(string), kid: k["id"].(string), key: key}
}

// sign makes a compact JWS of claims with key under kid (RS256).
func sign(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("oauth-authz-req+jwt").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// unsigned is an alg none JWT of claims.
func unsigned(claims map[string]any) string {
	h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "oauth-authz-req+jwt"})
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// TestRequestObjectRules: RFC 9101 request objects at the authorization
// endpoint and the PAR endpoint of the real server — a valid one works and
// its claims are the request (parameters outside it are ignored); each rule
// broken alone is refused on the error page: alg none, a key of another
// app, a key the app did not register, the wrong audience, no exp, an
// expired object, another iss, and a replayed jti.
func TestRequestObjectRules(t *testing.T) {
	t.Parallel()
	edge, issuer, _, admin := deviceApp(t)
	_, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "JAR"})
	projectID := proj["id"].(string)
	const redirect = "http://127.0.0.1:9/cb"
	app := addKeyedApp(t, edge.base, admin, projectID, "jar-web", redirect, nil)
	other := addKeyedApp(t, edge.base, admin, projectID, "jar-other", redirect, nil)
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)

	n := 0
	claims := func(edit map[string]any) map[string]any {
		n++
		now := time.Now()
		c := map[string]any{"iss": app.clientID, "aud": issuer, "exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix(),
			"nbf": now.Unix(), "jti": "jti-" + time.Now().Format("150405.000000000") + "-" + string(rune('a'+n%26)),
			"client_id": app.clientID, "redirect_uri": redirect, "response_type": "code", "scope": "openid", "state": "inside",
			"nonce": "n-1"}
		for k, v := range edit {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	authorize := func(request string, extra url.Values) *http.Response {
		q := url.Values{"client_id": {app.clientID}, "request": {request}}
		for k, v := range extra {
			q[k] = v
		}
		c := browser(t, issuer)
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		res, err := c.Get(issuer + "/oauth/v2/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	refused := func(name, request string) {
		t.Helper()
		res := authorize(request, nil)
		page := body(t, res)
		if res.StatusCode != 400 || res.Header.Get("Location") != "" || !strings.Contains(page, "invalid_request_object") {
			t.Errorf("%s: %d %q; want the error page with invalid_request_object\n%s", name, res.StatusCode, res.Header.Get("Location"), page)
		}
	}

	valid := sign(t, app.key, app.kid, claims(nil))
	if res := authorize(valid, nil); res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login/login?") {
		t.Fatalf("a valid request object: %d %q\n%s", res.StatusCode, res.Header.Get("Location"), body(t, res))
	}
	refused("replayed jti", valid)
	refused("alg none", unsigned(claims(nil)))
	refused("another app's key", sign(t, other.key, other.kid, claims(nil)))
	refused("an unregistered key under the app's kid", sign(t, stranger, app.kid, claims(nil)))
	refused("wrong aud", sign(t, app.key, app.kid, claims(map[string]any{"aud": issuer + "/oauth/v2/token"})))
	refused("no exp", sign(t, app.key, app.kid, claims(map[string]any{"exp": nil})))
	refused("expired", sign(t, app.key, app.kid, claims(map[string]any{"exp": time.Now().Add(-10 * time.Minute).Unix(),
		"iat": time.Now().Add(-20 * time.Minute).Unix(), "nbf": nil})))
	refused("another iss", sign(t, app.key, app.kid, claims(map[string]any{"iss": other.clientID})))
	refused("another client_id inside", sign(t, app.key, app.kid, claims(map[string]any{"client_id": other.clientID})))

	// Parameters outside the object are ignored: the redirect carries the
	// object's state to the object's redirect_uri.
	c := browser(t, issuer)
	res, err := c.Get(issuer + "/oauth/v2/authorize?" + url.Values{"client_id": {app.clientID},
		"request": {sign(t, app.key, app.kid, claims(nil))}, "state": {"outside"}, "scope": {"openid profile"},
		"redirect_uri": {"http://127.0.0.1:9/elsewhere"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, res)
	res = submit(t, c, edge.base, page, url.Values{"loginName": {"admin"}})
	page = body(t, res)
	res = submit(t, c, edge.base, page, url.Values{"password": {"Admin-Passw0rd-for-e2e"}})
	loc, _ := url.Parse(res.Header.Get("Location"))
	res.Body.Close()
	if !strings.HasPrefix(loc.String(), redirect+"?") || loc.Query().Get("state") != "inside" || loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s; want the object's redirect_uri and state", loc)
	}

	// Pushed with private_key_jwt and a request object: 201, and the
	// request_uri runs it.
	assertion := sign(t, app.key, app.kid, map[string]any{"iss": app.clientID, "sub": app.clientID, "aud": issuer,
		"exp": time.Now().Add(time.Minute).Unix(), "iat": time.Now().Unix(), "jti": "par-assertion-1"})
	st, pushed := postForm(t, edge.base+"/oauth/v2/par", url.Values{
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion},
		"request": {sign(t, app.key, app.kid, claims(nil))}})
	if st != http.StatusCreated || !strings.HasPrefix(str(pushed["request_uri"]), "urn:ietf:params:oauth:request_uri:") {
		t.Fatalf("PAR with a request object: %d %v", st, pushed)
	}
	res = authorize("", url.Values{"request": nil, "request_uri": {str(pushed["request_uri"])}})
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login/login?") {
		t.Fatalf("the pushed request: %d %q\n%s", res.StatusCode, res.Header.Get("Location"), body(t, res))
	}
	// A pushed request object that does not verify is refused at the push.
	st, bad := postForm(t, edge.base+"/oauth/v2/par", url.Values{
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion": {sign(t, app.key, app.kid, map[string]any{"iss": app.clientID, "sub": app.clientID, "aud": issuer,
			"exp": time.Now().Add(time.Minute).Unix(), "iat": time.Now().Unix(), "jti": "par-assertion-2"})},
		"request": {unsigned(claims(nil))}})
	if st != 400 || bad["error"] != "invalid_request_object" {
		t.Fatalf("PAR with alg none: %d %v", st, bad)
	}
}
