package stackbench

import (
	"cmp"
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
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/edge/service"
)

const issuer = "http://127.0.0.1:8080"

// stack is an embedded Gatehouse served in-process, wired as process.Run
// wires it (telemetry, JSON log to a file, server.Handler over edge).
type stack struct {
	h       http.Handler
	dataDir string
	log     *os.File
}

func newStack(tb testing.TB, alg string) *stack {
	tb.Helper()
	dir := tb.TempDir()
	env := map[string]string{
		"GATEHOUSE_ADDR":              "127.0.0.1:0",
		"GATEHOUSE_ISSUER":            issuer,
		"GATEHOUSE_DATA_DIR":          dir,
		"GATEHOUSE_SIGNING_ALGORITHM": alg,
		"GATEHOUSE_RATE_LIMIT":        "0",
		"GATEHOUSE_ADMIN_PASSWORD":    "Stack-bench-" + randomHex(6) + "-9a!",
		// STACKBENCH_SIGNING_LIBRARY=go compares the standard library's
		// signing with OpenSSL's (the default where it loads).
		"GATEHOUSE_SIGNING_LIBRARY": cmp.Or(os.Getenv("STACKBENCH_SIGNING_LIBRARY"), "auto"),
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Load(config.RoleEdge, getenv)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cfg.LoadMasterKey(); err != nil {
		tb.Fatal(err)
	}
	// A real file, buffered, as in production (stderr to a file or pipe).
	f, err := os.Create(filepath.Join(dir, "edge.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	out, closeLog := logging.Buffer(f)
	tb.Cleanup(func() { _ = closeLog() })
	log := logging.New(out, cfg.LogLevel).With("process", string(cfg.Role))
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, string(cfg.Role), telemetry.Options{Getenv: getenv})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	comp, err := service.Build(ctx, process.Env{Config: cfg, Logger: log, Telemetry: tel})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = comp.Close() })
	srv := server.New(server.Options{Name: string(cfg.Role), Handler: comp.Handler(), Logger: log,
		Checks: comp.Checks(), Metrics: tel.MetricsHandler(), AccessLog: cfg.Role != config.RoleEdge})
	return &stack{h: srv.Handler(), dataDir: dir, log: f}
}

// do serves one request in-process and returns status and body.
func (s *stack) do(method, path, authz, ctype string, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, issuer+path, rd)
	r.RemoteAddr = "127.0.0.1:40000"
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

func (s *stack) call(tb testing.TB, method, path, authz string, body any, out any) {
	tb.Helper()
	var raw, ctype string
	switch b := body.(type) {
	case nil:
	case url.Values:
		raw, ctype = b.Encode(), "application/x-www-form-urlencoded"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		raw, ctype = string(j), "application/json"
	}
	code, res := s.do(method, path, authz, ctype, raw)
	if code/100 != 2 {
		tb.Fatalf("%s %s: got %d %s; want 2xx", method, path, code, res)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			tb.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

type creds struct{ id, secret string }

func (c creds) basic() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.id)+":"+url.QueryEscape(c.secret)))
}

// fixture is what `make bench` creates, through the same public APIs.
type fixture struct {
	jwt, opaque, api creds
	projectID        string
}

func (s *stack) prepare(tb testing.TB) *fixture {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(s.dataDir, "bootstrap-admin-key.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var kf struct{ KeyID, Key, UserID string }
	if err := json.Unmarshal(raw, &kf); err != nil {
		tb.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	s.call(tb, http.MethodPost, "/oauth/v2/token", "", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {assertion(tb, kf.KeyID, kf.Key, kf.UserID)},
		"scope":      {"openid urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	}, &tok)
	bearer := "Bearer " + tok.AccessToken
	f := &fixture{}
	for _, u := range []struct {
		name, typ string
		into      *creds
	}{{"bench-jwt", "ACCESS_TOKEN_TYPE_JWT", &f.jwt}, {"bench-opaque", "ACCESS_TOKEN_TYPE_BEARER", &f.opaque}} {
		var mu struct {
			UserID string `json:"userId"`
		}
		s.call(tb, http.MethodPost, "/management/v1/users/machine", bearer,
			map[string]any{"userName": u.name, "name": u.name, "accessTokenType": u.typ}, &mu)
		var sec struct{ ClientID, ClientSecret string }
		s.call(tb, http.MethodPut, "/management/v1/users/"+mu.UserID+"/secret", bearer, map[string]any{}, &sec)
		*u.into = creds{sec.ClientID, sec.ClientSecret}
	}
	var proj struct{ ID string }
	s.call(tb, http.MethodPost, "/management/v1/projects", bearer, map[string]any{"name": "bench"}, &proj)
	f.projectID = proj.ID
	var app struct{ ClientID, ClientSecret string }
	s.call(tb, http.MethodPost, "/management/v1/projects/"+proj.ID+"/apps/api", bearer,
		map[string]any{"name": "bench-api", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"}, &app)
	f.api = creds{app.ClientID, app.ClientSecret}
	return f
}

// assertion is the RFC 7523 JWT an operator signs with the key file.
func assertion(tb testing.TB, kid, keyPEM, userID string) string {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		tb.Fatal("key file: not PEM")
	}
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		k8, err8 := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err8 != nil {
			tb.Fatal(err)
		}
		key = k8.(*rsa.PrivateKey)
	}
	now := time.Now()
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	claims, _ := json.Marshal(map[string]any{"iss": userID, "sub": userID, "aud": []string{issuer},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": randomHex(16)})
	enc := base64.RawURLEncoding
	in := enc.EncodeToString(hdr) + "." + enc.EncodeToString(claims)
	d := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, d[:])
	if err != nil {
		tb.Fatal(err)
	}
	return in + "." + enc.EncodeToString(sig)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run measures one request kind; cpu-ns/op is the process's user+system
// CPU per request (GC and background work included), comparable to
// `make bench`'s server CPU per request minus the HTTP server itself.
func run(b *testing.B, req func() (int, []byte), check func([]byte) bool) {
	b.Helper()
	for range 50 { // warm caches (client cache, key set document)
		if code, body := req(); code != http.StatusOK || !check(body) {
			b.Fatalf("got %d %s", code, body)
		}
	}
	b.ReportAllocs()
	m := benchcpu.Start(b)
	for b.Loop() {
		if code, body := req(); code != http.StatusOK || !check(body) {
			b.Fatalf("got %d %s", code, body)
		}
	}
	m.Report(b)
}

func tokenCheck(wantJWT bool) func([]byte) bool {
	return func(body []byte) bool {
		var t struct {
			AccessToken string `json:"access_token"`
			TokenType   string `json:"token_type"`
		}
		return json.Unmarshal(body, &t) == nil && t.TokenType == "Bearer" &&
			(strings.Count(t.AccessToken, ".") == 2) == wantJWT
	}
}

// BenchmarkClientCredentials is `make bench`'s token scenarios:
// client_credentials with client_secret_basic, JWT (ES256, RS256) and
// opaque access tokens.
func BenchmarkClientCredentials(b *testing.B) {
	for _, c := range []struct {
		name, alg string
		jwt       bool
	}{{"JWT-ES256", "ES256", true}, {"JWT-RS256", "RS256", true}, {"opaque", "ES256", false}} {
		b.Run(c.name, func(b *testing.B) {
			s := newStack(b, c.alg)
			f := s.prepare(b)
			cr := f.opaque
			if c.jwt {
				cr = f.jwt
			}
			authz := cr.basic()
			run(b, func() (int, []byte) {
				return s.do(http.MethodPost, "/oauth/v2/token", authz, "application/x-www-form-urlencoded", "grant_type=client_credentials")
			}, tokenCheck(c.jwt))
		})
	}
}

// BenchmarkIntrospectJWT introspects an RS256 JWT access token whose
// audience holds the API app's project, as `make bench` does.
func BenchmarkIntrospectJWT(b *testing.B) {
	s := newStack(b, "RS256")
	f := s.prepare(b)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	s.call(b, http.MethodPost, "/oauth/v2/token", f.jwt.basic(), url.Values{
		"grant_type": {"client_credentials"},
		"scope":      {"urn:gatehouse:iam:org:project:id:" + f.projectID + ":aud"},
	}, &tok)
	form := url.Values{"token": {tok.AccessToken}}.Encode()
	authz := f.api.basic()
	run(b, func() (int, []byte) {
		return s.do(http.MethodPost, "/oauth/v2/introspect", authz, "application/x-www-form-urlencoded", form)
	}, func(body []byte) bool { return strings.HasPrefix(string(body), `{"active":true`) })
}

// BenchmarkKeySet is GET /oauth/v2/keys.
func BenchmarkKeySet(b *testing.B) {
	s := newStack(b, "RS256")
	run(b, func() (int, []byte) {
		return s.do(http.MethodGet, "/oauth/v2/keys", "", "", "")
	}, func(body []byte) bool { return strings.HasPrefix(string(body), `{"keys":[{`) })
}

// BenchmarkClientCredentialsOpaqueParallel is the opaque scenario with 4
// concurrent requests on 2 CPUs, as `make bench` sends them: concurrent
// token records share a commit (see the tokens store's group commit).
func BenchmarkClientCredentialsOpaqueParallel(b *testing.B) {
	s := newStack(b, "ES256")
	f := s.prepare(b)
	authz := f.opaque.basic()
	check := tokenCheck(false)
	b.ReportAllocs()
	b.SetParallelism(2)
	m := benchcpu.Start(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code, body := s.do(http.MethodPost, "/oauth/v2/token", authz, "application/x-www-form-urlencoded", "grant_type=client_credentials"); code != http.StatusOK || !check(body) {
				b.Errorf("got %d %s", code, body)
				return
			}
		}
	})
	m.Report(b)
}

// BenchmarkOverHTTP serves the stack on a loopback listener and sends
// requests over 4 keep-alive connections, as `make bench` does, so a CPU
// profile shows the HTTP server's share too (client and server share the
// process: cpu-ns/op counts both).
func BenchmarkOverHTTP(b *testing.B) {
	for _, c := range []struct{ name, alg string }{{"token-ES256", "ES256"}, {"token-RS256", "RS256"}, {"keys", "ES256"}, {"introspect-RS256", "RS256"}, {"token-opaque", "ES256"}} {
		b.Run(c.name, func(b *testing.B) {
			s := newStack(b, c.alg)
			f := s.prepare(b)
			srv := httptest.NewServer(s.h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}}
			method, path, authz, form := http.MethodPost, "/oauth/v2/token", f.jwt.basic(), "grant_type=client_credentials"
			switch c.name {
			case "keys":
				method, path, authz, form = http.MethodGet, "/oauth/v2/keys", "", ""
			case "token-opaque":
				authz = f.opaque.basic()
			case "introspect-RS256":
				var tok struct {
					AccessToken string `json:"access_token"`
				}
				s.call(b, http.MethodPost, "/oauth/v2/token", f.jwt.basic(), url.Values{
					"grant_type": {"client_credentials"},
					"scope":      {"urn:gatehouse:iam:org:project:id:" + f.projectID + ":aud"},
				}, &tok)
				path, authz, form = "/oauth/v2/introspect", f.api.basic(), url.Values{"token": {tok.AccessToken}}.Encode()
			}
			do := func() error {
				var body io.Reader
				if form != "" {
					body = strings.NewReader(form)
				}
				req, _ := http.NewRequest(method, srv.URL+path, body)
				if form != "" {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
				if authz != "" {
					req.Header.Set("Authorization", authz)
				}
				res, err := client.Do(req)
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d", res.StatusCode)
				}
				return nil
			}
			for range 50 {
				if err := do(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetParallelism(2)
			m := benchcpu.Start(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := do(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			m.Report(b)
		})
	}
}
