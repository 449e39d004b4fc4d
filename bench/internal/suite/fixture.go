package suite

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// ManagementScope puts the management API into a token's audience.
const ManagementScope = "urn:gatehouse:iam:org:project:id:gatehouse:aud"

// Credentials are a client's id and secret.
type Credentials struct {
	ClientID, Secret string
}

// basic is the Authorization header value of client_secret_basic: id and
// secret are form-encoded before base64 (RFC 6749 §2.3.1).
func (c Credentials) basic() string {
	raw := url.QueryEscape(c.ClientID) + ":" + url.QueryEscape(c.Secret)
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(raw))
}

// Fixture is what the scenarios use, all created through public APIs.
type Fixture struct {
	JWTClient    Credentials // machine user with JWT access tokens
	OpaqueClient Credentials // machine user with opaque (bearer) access tokens
	API          Credentials // API app (client_secret_basic) that introspects
	ProjectID    string      // the API app's and the web app's project
	Web          Credentials // web app (code flow, client_secret_basic) the logins sign in to
	// DeviceClientID is a public app of the device grant; "" when the
	// server refused it (device-poll is then not available).
	DeviceClientID string
	// Users sign in, one login at a time each: the server refuses a fourth
	// concurrent password check of one user from one address (its lockout
	// counts each attempt in advance and lets three through).
	Users []Person
	// TOTPUsers sign in with a password and a TOTP code (PrepareTOTP).
	TOTPUsers []TOTPPerson
	m         mgmt // the management API as the bootstrap admin
}

// Person is a human user who signs in with a password.
type Person struct {
	ID, LoginName, Password string
}

// RedirectURI is the web app's redirect URI. A login ends at the redirect
// to it (it leaves the issuer), so nothing needs to listen there.
const RedirectURI = "http://127.0.0.1:9/cb"

// keyFile is bootstrap-admin-key.json.
type keyFile struct {
	Type   string `json:"type"`
	KeyID  string `json:"keyId"`
	Key    string `json:"key"`
	UserID string `json:"userId"`
}

// Prepare creates the scenario clients on t through the real APIs: a
// management token by the JWT profile grant (RFC 7523) with the bootstrap
// key, two machine users with secrets (JWT and opaque access tokens), a
// project with an API app (client_secret_basic) and a code-flow web app,
// and users human users with passwords (one per concurrent login).
func Prepare(ctx context.Context, c *http.Client, t Target, users int) (*Fixture, error) {
	raw, err := os.ReadFile(t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("bootstrap key file: %w", err)
	}
	var kf keyFile
	if err := json.Unmarshal(raw, &kf); err != nil {
		return nil, fmt.Errorf("bootstrap key file: %w", err)
	}
	assertion, err := profileAssertion(kf, t.Base, time.Now())
	if err != nil {
		return nil, err
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := call(ctx, c, http.MethodPost, t.Base+"/oauth/v2/token", "", "", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {assertion},
		"scope":      {"openid " + ManagementScope},
	}, &tok); err != nil {
		return nil, fmt.Errorf("management token (JWT profile grant): %w", err)
	}
	m := mgmt{c: c, base: t.Base + "/management/v1", token: tok.AccessToken}

	f := &Fixture{m: m}
	// Unique names let Prepare run more than once on one server.
	suffix := randomHex(4)
	for _, u := range []struct {
		name, tokenType string
		into            *Credentials
	}{
		{"bench-jwt-" + suffix, "ACCESS_TOKEN_TYPE_JWT", &f.JWTClient},
		{"bench-opaque-" + suffix, "ACCESS_TOKEN_TYPE_BEARER", &f.OpaqueClient},
	} {
		var mu struct {
			UserID string `json:"userId"`
		}
		if err := m.do(ctx, http.MethodPost, "/users/machine", map[string]any{
			"userName": u.name, "name": "Benchmark client " + u.name, "accessTokenType": u.tokenType,
		}, &mu); err != nil {
			return nil, fmt.Errorf("add machine user %s: %w", u.name, err)
		}
		var sec struct {
			ClientID     string `json:"clientId"`
			ClientSecret string `json:"clientSecret"`
		}
		if err := m.do(ctx, http.MethodPut, "/users/"+url.PathEscape(mu.UserID)+"/secret", map[string]any{}, &sec); err != nil {
			return nil, fmt.Errorf("generate secret of %s: %w", u.name, err)
		}
		*u.into = Credentials{ClientID: sec.ClientID, Secret: sec.ClientSecret}
	}
	var proj struct {
		ID string `json:"id"`
	}
	if err := m.do(ctx, http.MethodPost, "/projects", map[string]any{"name": "bench-" + suffix}, &proj); err != nil {
		return nil, fmt.Errorf("add project: %w", err)
	}
	f.ProjectID = proj.ID
	var app struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	}
	if err := m.do(ctx, http.MethodPost, "/projects/"+url.PathEscape(proj.ID)+"/apps/api", map[string]any{
		"name": "bench-api", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC",
	}, &app); err != nil {
		return nil, fmt.Errorf("add API app: %w", err)
	}
	f.API = Credentials{ClientID: app.ClientID, Secret: app.ClientSecret}
	if f.Web, err = addWebApp(ctx, m, proj.ID); err != nil {
		return nil, err
	}
	if f.DeviceClientID, err = addDeviceApp(ctx, m, proj.ID); err != nil {
		var se *StatusError
		if !errors.As(err, &se) || se.Status != http.StatusBadRequest {
			return nil, fmt.Errorf("add device app: %w", err)
		}
		f.DeviceClientID = "" // a build before the device grant
	}
	for i := range users {
		u, err := addUser(ctx, m, fmt.Sprintf("bench-user-%s-%d", suffix, i))
		if err != nil {
			return nil, err
		}
		f.Users = append(f.Users, u)
	}
	for name, cr := range map[string]Credentials{"JWT machine user": f.JWTClient, "opaque machine user": f.OpaqueClient, "API app": f.API, "web app": f.Web} {
		if cr.ClientID == "" || cr.Secret == "" {
			return nil, fmt.Errorf("%s: the management API returned no client id or secret", name)
		}
	}
	return f, nil
}

// addWebApp adds a confidential web app for the authorization code flow
// (with refresh tokens, as an app that keeps its users signed in) whose
// only redirect URI is RedirectURI.
func addWebApp(ctx context.Context, m mgmt, projectID string) (Credentials, error) {
	var app struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	}
	if err := m.do(ctx, http.MethodPost, "/projects/"+url.PathEscape(projectID)+"/apps/oidc", map[string]any{
		"name": "bench-web", "redirectUris": []string{RedirectURI},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes":    []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType":       "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "accessTokenType": "OIDC_TOKEN_TYPE_BEARER",
	}, &app); err != nil {
		return Credentials{}, fmt.Errorf("add web app: %w", err)
	}
	return Credentials{ClientID: app.ClientID, Secret: app.ClientSecret}, nil
}

// addUser imports a human user with a password. The import hashes it with
// the server's current argon2id parameters, so no login rehashes it, and
// requires no change at the first login.
func addUser(ctx context.Context, m mgmt, name string) (Person, error) {
	p := Person{LoginName: name, Password: "Bench-" + randomHex(8) + "-Pw1!"}
	var u struct {
		UserID string `json:"userId"`
	}
	if err := m.do(ctx, http.MethodPost, "/users/human/_import", map[string]any{
		"userName": name,
		"profile":  map[string]any{"firstName": "Bench", "lastName": "User"},
		"email":    map[string]any{"email": name + "@example.com", "isEmailVerified": true},
		"password": p.Password,
	}, &u); err != nil {
		return Person{}, fmt.Errorf("import user %s: %w", name, err)
	}
	if u.UserID == "" {
		return Person{}, fmt.Errorf("import user %s: no user id in the answer", name)
	}
	p.ID = u.UserID
	return p, nil
}

// profileAssertion signs the RFC 7523 assertion an operator makes from the
// key file: iss and sub the machine user, aud the issuer.
func profileAssertion(kf keyFile, issuer string, now time.Time) (string, error) {
	block, _ := pem.Decode([]byte(kf.Key))
	if block == nil {
		return "", errors.New("bootstrap key file: key is not PEM")
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		key = k
	} else if k8, err8 := x509.ParsePKCS8PrivateKey(block.Bytes); err8 == nil {
		rk, ok := k8.(*rsa.PrivateKey)
		if !ok {
			return "", errors.New("bootstrap key file: key is not RSA")
		}
		key = rk
	} else {
		return "", fmt.Errorf("bootstrap key file: parse key: %w", err)
	}
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kf.KeyID})
	claims, _ := json.Marshal(map[string]any{
		"iss": kf.UserID, "sub": kf.UserID, "aud": []string{issuer},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": randomHex(16),
	})
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(hdr) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sign assertion: %w", err)
	}
	return input + "." + enc.EncodeToString(sig), nil
}

// mgmt calls the management REST API with a bearer token.
type mgmt struct {
	c     *http.Client
	base  string
	token string
}

func (m mgmt) do(ctx context.Context, method, path string, body, out any) error {
	return call(ctx, m.c, method, m.base+path, "Bearer "+m.token, "application/json", body, out)
}

// call sends one setup request (JSON, or a form for url.Values) and decodes
// a 2xx JSON answer into out.
func call(ctx context.Context, c *http.Client, method, u, authz, ctype string, body, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case url.Values:
		rd, ctype = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		return &StatusError{Method: method, URL: u, Status: res.StatusCode, Body: strings.TrimSpace(string(raw))}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, u, err)
		}
	}
	return nil
}

// StatusError is a non-2xx answer to a setup request.
type StatusError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *StatusError) Error() string {
	b := e.Body
	if len(b) > 300 {
		b = b[:300] + "…"
	}
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.URL, e.Status, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
