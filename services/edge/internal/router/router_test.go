package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/proxy"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

func samplePath(r routes.Route) string {
	if r.IsPrefix() {
		return r.Prefix() + "sample/leaf"
	}
	return r.Pattern
}

func TestEveryRouteReachesItsService(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, nil)
			client := edgetest.H2CClient(t)
			for _, route := range routes.Table() {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					before := f.received()
					p := samplePath(route)
					req, _ := http.NewRequest(method, f.url(p), strings.NewReader("a=b"))
					resp, body := edgetest.Do(t, client, req)
					if resp.StatusCode != http.StatusOK || string(body) != string(route.Service) {
						t.Errorf("%s %s: got %d %q; want 200 from %s", method, p, resp.StatusCode, body, route.Service)
						continue
					}
					got := f.backends[route.Service].Last(t)
					if got.Path != p || got.Method != method {
						t.Errorf("%s %s: %s received %s %s", method, p, route.Service, got.Method, got.Path)
					}
					if f.received() != before+1 {
						t.Errorf("%s %s: %d backends called; want exactly one", method, p, f.received()-before)
					}
				}
			}
		})
	}
}

func TestUnknownAndInternalPathsAre404(t *testing.T) {
	paths := []string{
		"/",
		"/nope",
		"/healthz",
		"/metrics",
		"/.well-known/oauth-authorization-server",
		"/oauth/v2/token/",
		"/oauth/v2",
		"/ui/loginx",
		"/management/v1",
		"/admin",
		"/gatehouse.directory.v1.DirectoryService/VerifyPassword",
		"/gatehouse.tokens.v1.TokenService/CreateAuthorizationCode",
		"/gatehouse.authn.v1.AuthnService/Anything",
		"/gatehouse.management.v2.ManagementService/GetUser",
		"/grpc.health.v1.Health/Check",
		"/management/v1/../gatehouse.directory.v1.DirectoryService/GetUser",
		"/management/v1/x%2F..%2F..%2Fgatehouse.directory.v1.DirectoryService%2FGetUser",
		"/ui/login/./../../gatehouse.tokens.v1.TokenService/X",
		"/admin/v1//x",
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, nil)
			client := edgetest.H2CClient(t)
			for _, p := range paths {
				for _, method := range []string{http.MethodGet, http.MethodPost} {
					req, err := http.NewRequest(method, f.url(p), nil)
					if err != nil {
						t.Fatalf("%s: %v", p, err)
					}
					resp, body := edgetest.Do(t, client, req)
					if resp.StatusCode != http.StatusNotFound {
						t.Errorf("%s %s: got %d; want 404", method, p, resp.StatusCode)
						continue
					}
					if e := decodeError(t, body); e["error"] != "not_found" {
						t.Errorf("%s %s: got body %q; want {\"error\":\"not_found\"}", method, p, body)
					}
				}
			}
			if n := f.received(); n != 0 {
				t.Fatalf("backends received %d requests for unrouted paths; want 0", n)
			}
		})
	}
}

func TestServiceStatusPassesThroughGin(t *testing.T) {
	cases := []struct {
		path   string
		want   int
		body   string
		handle func(http.ResponseWriter)
	}{
		{"/implicit200", 200, "ok", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "ok") }},
		{"/explicit200", 200, "ok", func(w http.ResponseWriter) { w.WriteHeader(200); _, _ = io.WriteString(w, "ok") }},
		{"/created", 201, "made", func(w http.ResponseWriter) { w.WriteHeader(201); _, _ = io.WriteString(w, "made") }},
		{"/nocontent", 204, "", func(w http.ResponseWriter) { w.WriteHeader(204) }},
		{"/nothing", 200, "", func(http.ResponseWriter) {}},
		{"/conflict", 409, "c", func(w http.ResponseWriter) { w.WriteHeader(409); _, _ = io.WriteString(w, "c") }},
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, nil)
			f.backends[routes.Directory].Respond = func(w http.ResponseWriter, r *http.Request) {
				for _, c := range cases {
					if strings.HasSuffix(r.URL.Path, c.path) {
						c.handle(w)
						return
					}
				}
			}
			for _, client := range []*http.Client{edgetest.H2CClient(t), edgetest.HTTP1Client(t)} {
				for _, c := range cases {
					for _, prefix := range []string{"/management/v1/users", "/gatehouse.management.v1.ManagementService"} {
						resp, body := get(t, client, f.url(prefix+c.path), nil)
						if resp.StatusCode != c.want || string(body) != c.body {
							t.Errorf("%s%s: got %d %q; want %d %q", prefix, c.path, resp.StatusCode, body, c.want, c.body)
						}
					}
				}
			}
		})
	}
}

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestID(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, nil)
			client := edgetest.HTTP1Client(t)
			tokens := f.backends[routes.Tokens]

			resp, _ := get(t, client, f.url("/oauth/v2/keys"), nil)
			id := resp.Header.Get("X-Request-Id")
			if !generatedID.MatchString(id) {
				t.Fatalf("generated id %q; want 32 hex characters", id)
			}
			if got := tokens.Last(t).Header.Get("X-Request-Id"); got != id {
				t.Fatalf("service got X-Request-Id %q; want the echoed %q", got, id)
			}

			resp, _ = get(t, client, f.url("/oauth/v2/keys"), nil)
			if resp.Header.Get("X-Request-Id") == id {
				t.Fatal("two requests got the same generated id")
			}

			sane := "Abc-123_x.y"
			resp, _ = get(t, client, f.url("/oauth/v2/keys"), map[string]string{"X-Request-Id": sane})
			if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != sane {
				t.Fatalf("sane id: echoed %q; want [%q]", got, sane)
			}
			if got := tokens.Last(t).Header.Get("X-Request-Id"); got != sane {
				t.Fatalf("sane id: service got %q; want %q", got, sane)
			}

			for _, bad := range []string{"has space", "semi;colon", strings.Repeat("a", 129), "ünïcode", "a\"b"} {
				resp, _ = get(t, client, f.url("/oauth/v2/keys"), map[string]string{"X-Request-Id": bad})
				got := resp.Header.Get("X-Request-Id")
				if !generatedID.MatchString(got) {
					t.Errorf("bad id %q: echoed %q; want a generated one", bad, got)
				}
				if fwd := tokens.Last(t).Header.Get("X-Request-Id"); fwd != got {
					t.Errorf("bad id %q: service got %q; want %q", bad, fwd, got)
				}
			}
			max := strings.Repeat("a", 128)
			resp, _ = get(t, client, f.url("/oauth/v2/keys"), map[string]string{"X-Request-Id": max})
			if resp.Header.Get("X-Request-Id") != max {
				t.Errorf("128-character id was not kept")
			}

			// A service echoing another id must not produce two values.
			tokens.Respond = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "service-made-this")
			}
			resp, _ = get(t, client, f.url("/oauth/v2/keys"), map[string]string{"X-Request-Id": "edge-id"})
			if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "edge-id" {
				t.Fatalf("service overwrote the id: got %q; want [edge-id]", got)
			}
		})
	}
}

func TestAccessLog(t *testing.T) {
	f := newFixture(t, "proxied", nil)
	resp, _ := get(t, edgetest.HTTP1Client(t), f.url("/oauth/v2/authorize?code=SECRETCODE&id_token_hint=SECRETHINT"),
		map[string]string{"X-Request-Id": "log-test"})
	if resp.StatusCode != 200 {
		t.Fatalf("got %d; want 200", resp.StatusCode)
	}
	get(t, edgetest.HTTP1Client(t), f.url("/unknown?access_token=SECRETTOKEN"), nil)
	f.logs.waitFor(t, `"path":"/unknown"`)
	f.logs.waitFor(t, `"request_id":"log-test"`)

	logs := f.logs.String()
	for _, secret := range []string{"SECRETCODE", "SECRETHINT", "SECRETTOKEN", "code=", "?"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("access log contains %q:\n%s", secret, logs)
		}
	}
	var line map[string]any
	for _, l := range f.logs.lines(t) {
		if l["msg"] == "request" && l["request_id"] == "log-test" {
			line = l
		}
	}
	if line == nil {
		t.Fatalf("no access log line for the request:\n%s", logs)
	}
	want := map[string]any{
		"method": "GET", "path": "/oauth/v2/authorize", "status": float64(200),
		"bytes": float64(len("authn")), "client": "127.0.0.1", "service": "authn", "proto": "HTTP/1.1",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access log %s: got %v; want %v", k, line[k], v)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("access log lacks duration_ms: %v", line)
	}
}

// Discovery and the key set, public and the most frequent requests, are
// logged at debug when they succeed; their failures as every request's.
func TestMetadataSuccessesLoggedAtDebug(t *testing.T) {
	f := newFixture(t, "proxied", nil)
	client := edgetest.HTTP1Client(t)
	get(t, client, f.url("/oauth/v2/keys"), map[string]string{"X-Request-Id": "keys-ok"})
	get(t, client, f.url("/oauth/v2/authorize"), map[string]string{"X-Request-Id": "page-ok"})
	f.backends[routes.Tokens].Respond = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }
	get(t, client, f.url("/.well-known/openid-configuration"), map[string]string{"X-Request-Id": "discovery-failed"})
	f.logs.waitFor(t, `"request_id":"discovery-failed"`)
	want := map[string]string{"keys-ok": "DEBUG", "page-ok": "INFO", "discovery-failed": "WARN"}
	for _, l := range f.logs.lines(t) {
		id, _ := l["request_id"].(string)
		if w, ok := want[id]; ok && l["msg"] == "request" {
			if l["level"] != w {
				t.Errorf("%s logged at %v; want %s", id, l["level"], w)
			}
			delete(want, id)
		}
	}
	if len(want) > 0 {
		t.Fatalf("no access log line for %v:\n%s", want, f.logs.String())
	}
}

func TestSecurityHeaders(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) { o.Issuer, _ = url.Parse("https://id.example.com") })
			client := edgetest.H2CClient(t)
			for _, p := range []string{"/oauth/v2/keys", "/ui/login", "/no/such/path"} {
				resp, _ := get(t, client, f.url(p), nil)
				want := map[string]string{
					"X-Content-Type-Options":    "nosniff",
					"Referrer-Policy":           "no-referrer",
					"X-Frame-Options":           "DENY",
					"Content-Security-Policy":   "frame-ancestors 'none'",
					"Strict-Transport-Security": "max-age=31536000",
				}
				for k, v := range want {
					if got := resp.Header.Values(k); len(got) != 1 || got[0] != v {
						t.Errorf("%s: %s = %q; want [%q]", p, k, got, v)
					}
				}
			}

			// A service's own policy wins and is not doubled.
			f.backends[routes.Authn].Respond = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
				w.Header().Set("X-Frame-Options", "SAMEORIGIN")
				_, _ = io.WriteString(w, "<html>")
			}
			resp, _ := get(t, client, f.url("/ui/login"), nil)
			if got := resp.Header.Values("Content-Security-Policy"); len(got) != 1 || got[0] != "default-src 'self'; frame-ancestors 'none'" {
				t.Errorf("service CSP: got %q; want the service's only", got)
			}
			if got := resp.Header.Values("X-Frame-Options"); len(got) != 1 || got[0] != "DENY" {
				t.Errorf("X-Frame-Options: got %q; want edge's single DENY", got)
			}
		})
	}

	t.Run("no HSTS without https issuer", func(t *testing.T) {
		for _, issuer := range []string{"", "http://localhost:8080"} {
			f := newFixture(t, "in-process", func(o *Options) {
				if issuer != "" {
					o.Issuer, _ = url.Parse(issuer)
				}
			})
			resp, _ := get(t, edgetest.H2CClient(t), f.url("/oauth/v2/keys"), nil)
			if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
				t.Errorf("issuer %q: got HSTS %q; want none", issuer, got)
			}
		}
	})
}

func TestCORS(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, nil)
			client := edgetest.HTTP1Client(t)
			cors := []string{"/.well-known/openid-configuration", "/oauth/v2/keys", "/oauth/v2/token",
				"/oidc/v1/userinfo", "/oauth/v2/introspect", "/oauth/v2/revoke"}
			for _, p := range cors {
				req, _ := http.NewRequest(http.MethodOptions, f.url(p), nil)
				req.Header.Set("Origin", "https://spa.example.org")
				req.Header.Set("Access-Control-Request-Method", "POST")
				req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
				resp, _ := edgetest.Do(t, client, req)
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("preflight %s: got %d; want 204", p, resp.StatusCode)
				}
				h := resp.Header
				if h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Allow-Credentials") != "" {
					t.Errorf("preflight %s: allow-origin %q, allow-credentials %q; want * and none", p,
						h.Get("Access-Control-Allow-Origin"), h.Get("Access-Control-Allow-Credentials"))
				}
				if !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
					!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") {
					t.Errorf("preflight %s: methods %q headers %q; want POST and Authorization", p,
						h.Get("Access-Control-Allow-Methods"), h.Get("Access-Control-Allow-Headers"))
				}

				resp, _ = get(t, client, f.url(p), map[string]string{"Origin": "https://spa.example.org"})
				if got := resp.Header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != "*" {
					t.Errorf("GET %s: allow-origin %q; want [*]", p, got)
				}
			}
			if n := f.received(); n != len(cors) {
				t.Fatalf("services received %d requests; want only the %d GETs (preflights answered by edge)", n, len(cors))
			}

			for _, p := range []string{"/management/v1/users", "/ui/login", "/oauth/v2/authorize"} {
				resp, _ := get(t, client, f.url(p), map[string]string{"Origin": "https://evil.example"})
				if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
					t.Errorf("GET %s: allow-origin %q; want none", p, got)
				}
			}
			// OPTIONS on a non-CORS route is the service's business.
			req, _ := http.NewRequest(http.MethodOptions, f.url("/ui/login"), nil)
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			resp, _ := edgetest.Do(t, client, req)
			if resp.StatusCode != 200 || f.backends[routes.Authn].Last(t).Method != http.MethodOptions {
				t.Errorf("OPTIONS /ui/login: got %d; want it forwarded to authn", resp.StatusCode)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	const limit = 1024
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) {
				o.MaxBodyBytes = limit
				o.MaxRPCBodyBytes = 4 * limit
			})
			post := func(t *testing.T, client *http.Client, p string, body io.Reader, size int64) (*http.Response, []byte) {
				req, _ := http.NewRequest(http.MethodPost, f.url(p), body)
				if size >= 0 {
					req.ContentLength = size
				}
				return edgetest.Do(t, client, req)
			}
			for name, client := range map[string]*http.Client{"h2c": edgetest.H2CClient(t), "http1": edgetest.HTTP1Client(t)} {
				t.Run(name, func(t *testing.T) {
					tokens := f.backends[routes.Tokens]
					tokens.Reset()
					resp, body := post(t, client, "/oauth/v2/token", strings.NewReader(strings.Repeat("x", limit+1)), limit+1)
					if resp.StatusCode != http.StatusRequestEntityTooLarge {
						t.Fatalf("declared oversize: got %d %q; want 413", resp.StatusCode, body)
					}
					if e := decodeError(t, body); e["error"] != "request_too_large" {
						t.Fatalf("declared oversize: body %q", body)
					}
					if len(tokens.Requests()) != 0 {
						t.Fatal("declared oversize reached the service")
					}

					resp, body = post(t, client, "/oauth/v2/token", unsizedReader(limit+1), -1)
					if resp.StatusCode != http.StatusRequestEntityTooLarge {
						t.Fatalf("streamed oversize: got %d %q; want 413", resp.StatusCode, body)
					}
					if e := decodeError(t, body); e["error"] != "request_too_large" {
						t.Fatalf("streamed oversize: body %q", body)
					}

					resp, _ = post(t, client, "/oauth/v2/token", unsizedReader(limit), -1)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("exactly the limit: got %d; want 200", resp.StatusCode)
					}
					if got := len(tokens.Last(t).Body); got != limit {
						t.Fatalf("service got %d bytes; want %d", got, limit)
					}

					resp, _ = post(t, client, "/gatehouse.management.v1.ManagementService/AddUser", unsizedReader(3*limit), -1)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("RPC body under the RPC limit: got %d; want 200", resp.StatusCode)
					}
					resp, _ = post(t, client, "/gatehouse.management.v1.ManagementService/AddUser", unsizedReader(4*limit+1), -1)
					if resp.StatusCode != http.StatusRequestEntityTooLarge {
						t.Fatalf("RPC body over the RPC limit: got %d; want 413", resp.StatusCode)
					}
				})
			}
		})
	}
}

func frozenMemory(t *testing.T, perSecond float64, burst int) *ratelimit.Memory {
	t.Helper()
	at := time.Unix(1_800_000_000, 0)
	m, err := ratelimit.NewMemory(perSecond, burst, ratelimit.WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatalf("NewMemory: %v", err)
	}
	return m
}

// browserOnly limits the browser class alone.
func browserOnly(l ratelimit.Limiter) map[routes.Class]ratelimit.Limiter {
	return map[routes.Class]ratelimit.Limiter{routes.ClassBrowser: l}
}

// rateLimited reports whether a 429 answer names the condition: as an HTML
// page for a browser route (a person's navigation), as the JSON error
// otherwise.
func rateLimited(t *testing.T, path string, resp *http.Response, body []byte) bool {
	t.Helper()
	if path == "/ui/login" || path == "/oauth/v2/authorize" {
		return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") && strings.Contains(string(body), "<h1>Too many requests</h1>")
	}
	return decodeError(t, body)["error"] == "rate_limited"
}

func TestRateLimitMemory(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) {
				o.Limiters = browserOnly(frozenMemory(t, 0.5, 2))
				o.TrustedProxies = []string{"127.0.0.1"}
			})
			client := edgetest.H2CClient(t)
			from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }

			resp, _ := get(t, client, f.url("/ui/login"), from("198.51.100.1"))
			if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Limit") != "2" || resp.Header.Get("RateLimit-Remaining") != "1" ||
				resp.Header.Get("X-RateLimit-Remaining") != "1" {
				t.Fatalf("first: got %d with limit %q remaining %q; want 200, 2, 1", resp.StatusCode,
					resp.Header.Get("RateLimit-Limit"), resp.Header.Get("RateLimit-Remaining"))
			}
			// Unknown paths count too.
			resp, _ = get(t, client, f.url("/nope"), from("198.51.100.1"))
			if resp.StatusCode != 404 {
				t.Fatalf("second: got %d; want 404", resp.StatusCode)
			}
			before := f.received()
			for _, p := range []string{"/ui/login", "/oauth/v2/authorize", "/nope"} {
				resp, body := get(t, client, f.url(p), from("198.51.100.1"))
				if resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("%s over the limit: got %d; want 429", p, resp.StatusCode)
				}
				if got := resp.Header.Get("Retry-After"); got != "2" {
					t.Fatalf("Retry-After %q; want 2 (one token at 0.5/s)", got)
				}
				if !rateLimited(t, p, resp, body) {
					t.Fatalf("429 body %q; want error rate_limited (a page for a browser route)", body)
				}
				if resp.Header.Get("RateLimit-Remaining") != "0" {
					t.Fatalf("429 RateLimit-Remaining %q; want 0", resp.Header.Get("RateLimit-Remaining"))
				}
			}
			if f.received() != before {
				t.Fatal("limited requests reached a service")
			}
			// Another client has its own budget.
			if resp, _ := get(t, client, f.url("/ui/login"), from("198.51.100.2")); resp.StatusCode != 200 {
				t.Fatalf("other client: got %d; want 200", resp.StatusCode)
			}
			// Other classes have budgets of their own: here none.
			for _, p := range []string{"/oauth/v2/keys", "/gatehouse.management.v1.ManagementService/GetUser", "/oauth/v2/token"} {
				if resp, _ := get(t, client, f.url(p), from("198.51.100.1")); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Limit") != "" {
					t.Fatalf("%s with the browser budget spent: got %d, RateLimit-Limit %q; want 200 and no rate headers",
						p, resp.StatusCode, resp.Header.Get("RateLimit-Limit"))
				}
			}
		})
	}
}

func TestRateLimitRedis(t *testing.T) {
	rdb, prefix := testutil.Redis(t)
	limiter, err := ratelimit.NewRedis(rdb, prefix, 1, 2, nil)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	f := newFixture(t, "in-process", func(o *Options) { o.Limiters = browserOnly(limiter) })
	client := edgetest.H2CClient(t)
	limited := false
	for range 10 {
		resp, body := get(t, client, f.url("/oauth/v2/authorize"), nil)
		if resp.StatusCode == http.StatusTooManyRequests {
			if resp.Header.Get("Retry-After") == "" || !rateLimited(t, "/oauth/v2/authorize", resp, body) {
				t.Fatalf("429 without Retry-After or body: %v %q", resp.Header, body)
			}
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("10 requests at burst 2, 1/s: none limited")
	}
	keys, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 1 || keys[0] != prefix+"ip4:127.0.0.1" {
		t.Fatalf("redis keys under prefix: %q, %v; want [%sip4:127.0.0.1]", keys, err, prefix)
	}
}

func TestRateLimitRedisDownFailsOpen(t *testing.T) {
	rdb := testRedisClient(t, edgetest.ClosedAddr(t))
	f := newFixture(t, "in-process", func(o *Options) {
		l, err := ratelimit.NewRedis(rdb, "edge:", 1, 1, o.Logger)
		if err != nil {
			t.Fatalf("NewRedis: %v", err)
		}
		o.Limiters = browserOnly(l)
	})
	for range 3 {
		if resp, _ := get(t, edgetest.H2CClient(t), f.url("/ui/login"), nil); resp.StatusCode != 200 {
			t.Fatalf("with Redis down: got %d; want 200 (fail open)", resp.StatusCode)
		}
	}
	if !strings.Contains(f.logs.String(), `"level":"WARN","msg":"rate limiter store unavailable`) {
		t.Fatalf("no warning about the limiter store:\n%s", f.logs.String())
	}
}

type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("store on fire")
}

func TestLimiterErrorFailsOpen(t *testing.T) {
	f := newFixture(t, "in-process", func(o *Options) {
		o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassClient: failingLimiter{}}
		o.AddressCap = failingLimiter{}
	})
	resp, _ := get(t, edgetest.H2CClient(t), f.url("/oauth/v2/token"), map[string]string{"Authorization": "Basic " + basic("c", "s")})
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Limit") != "" {
		t.Fatalf("got %d, RateLimit-Limit %q; want 200 and no rate headers", resp.StatusCode, resp.Header.Get("RateLimit-Limit"))
	}
	if !strings.Contains(f.logs.String(), "store on fire") {
		t.Fatalf("limiter error not logged:\n%s", f.logs.String())
	}
}

func TestClientAddressAndForwarding(t *testing.T) {
	spoof := map[string]string{
		"X-Forwarded-For":   "203.0.113.66",
		"X-Forwarded-Proto": "https",
		"X-Forwarded-Host":  "evil.example",
		"X-Real-Ip":         "203.0.113.66",
		"Forwarded":         "for=203.0.113.66",
		// A proxy removes the headers Connection names, from its
		// incoming hop: never the ones edge sets for the service.
		"Connection":           "X-Real-Ip, X-Request-Id, Gatehouse-Edge-Proof",
		"X-Request-Id":         "req-kept",
		"Gatehouse-Edge-Proof": "forged",
	}
	for _, mode := range modes {
		t.Run(mode+"/untrusted", func(t *testing.T) {
			f := newFixture(t, mode, nil)
			get(t, edgetest.HTTP1Client(t), f.url("/ui/login"), spoof)
			got := f.backends[routes.Authn].Last(t)
			if ip := got.Header.Values("X-Real-Ip"); len(ip) != 1 || ip[0] != "127.0.0.1" {
				t.Errorf("X-Real-Ip %q; want the peer 127.0.0.1", ip)
			}
			if id := got.Header.Get("X-Request-Id"); id != "req-kept" {
				t.Errorf("X-Request-Id %q; want req-kept", id)
			}
			if p := got.Header.Get("Gatehouse-Edge-Proof"); p == "forged" {
				t.Errorf("the client's Gatehouse-Edge-Proof reached the service")
			}
			if got.Header.Get("Forwarded") != "" || got.Header.Get("X-Forwarded-Host") == "evil.example" ||
				strings.Contains(got.Header.Get("X-Forwarded-For"), "203.0.113.66") || got.Header.Get("X-Forwarded-Proto") == "https" {
				t.Errorf("forged forwarding headers reached the service: %v", got.Header)
			}
		})
		t.Run(mode+"/trusted", func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) { o.TrustedProxies = []string{"127.0.0.1/32", "10.0.0.0/8"} })
			get(t, edgetest.HTTP1Client(t), f.url("/ui/login"), map[string]string{
				"X-Forwarded-For":   "203.0.113.66, 198.51.100.7, 10.1.2.3",
				"X-Forwarded-Proto": "https",
				"Connection":        "X-Real-Ip",
			})
			got := f.backends[routes.Authn].Last(t)
			if ip := got.Header.Get("X-Real-Ip"); ip != "198.51.100.7" {
				t.Errorf("X-Real-Ip %q; want 198.51.100.7 (first untrusted from the right)", ip)
			}
			if p := got.Header.Get("X-Forwarded-Proto"); p != "https" {
				t.Errorf("X-Forwarded-Proto %q; want https from the trusted proxy", p)
			}
			wantXFF := "203.0.113.66, 198.51.100.7, 10.1.2.3"
			if mode == "proxied" {
				wantXFF += ", 127.0.0.1"
			}
			if xff := strings.Join(got.Header.Values("X-Forwarded-For"), ", "); xff != wantXFF {
				t.Errorf("X-Forwarded-For %q; want %q", xff, wantXFF)
			}
		})
	}
}

// TestServiceBelievesOnlyEdgesAddress: a service in its own process
// (guarded by rpc.GuardClientAddr) gets the address edge resolved, even
// when the client asks the hop to drop it, while a client that reaches the
// service directly, or through a proxy without the internal token, is
// taken for its socket address whatever X-Real-Ip it sends.
func TestServiceBelievesOnlyEdgesAddress(t *testing.T) {
	const token = "router-test-internal-token-0123456789"
	backend := &edgetest.Backend{Name: "authn"}
	service := edgetest.Start(t, rpc.GuardClientAddr(token, backend))
	edgeTo := func(opts ...proxy.Option) *url.URL {
		p, err := proxy.New(service.URL, "authn", nil, opts...)
		if err != nil {
			t.Fatalf("proxy.New: %v", err)
		}
		t.Cleanup(p.CloseIdleConnections)
		services := map[routes.Service]http.Handler{}
		for _, svc := range routes.Services() {
			services[svc] = p
		}
		h, err := New(Options{Services: services, TrustedProxies: []string{"127.0.0.1"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return edgetest.Start(t, h).URL
	}
	forged := map[string]string{"X-Forwarded-For": "198.51.100.7", "X-Real-Ip": "203.0.113.66", "Connection": "X-Real-Ip"}
	seen := func(base *url.URL) string {
		t.Helper()
		get(t, edgetest.HTTP1Client(t), base.String()+"/ui/login", forged)
		return backend.Last(t).Header.Get("X-Real-Ip")
	}
	if got := seen(edgeTo(proxy.WithInternalToken(token))); got != "198.51.100.7" {
		t.Errorf("through edge: the service saw %q; want the address edge resolved, 198.51.100.7", got)
	}
	if got := seen(service.URL); got != "127.0.0.1" {
		t.Errorf("straight to the service: it saw %q; want the socket address 127.0.0.1", got)
	}
	if got := seen(edgeTo()); got != "127.0.0.1" {
		t.Errorf("through a proxy without the internal token: the service saw %q; want 127.0.0.1", got)
	}
}

// A service that cannot be reached is answered 503 with Retry-After: for
// the browser routes (a person's top-level navigation) as an HTML page,
// for every other route as the JSON error the protocols expect.
func TestOutageAnswersPagesToBrowsers(t *testing.T) {
	target, _ := url.Parse("http://" + edgetest.ClosedAddr(t))
	p, err := proxy.New(target, "authn", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	services := map[routes.Service]http.Handler{}
	for _, svc := range routes.Services() {
		services[svc] = p
	}
	h, err := New(Options{Services: services, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	base := edgetest.Start(t, h).URL.String()
	client := edgetest.HTTP1Client(t)
	for _, route := range routes.Table() {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			if route.Method != "" && route.Method != method {
				continue
			}
			req, _ := http.NewRequest(method, base+samplePath(route), strings.NewReader("a=b"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, body := edgetest.Do(t, client, req)
			ct := resp.Header.Get("Content-Type")
			switch {
			case resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "":
				t.Errorf("%s %s: %d, Retry-After %q; want 503 with Retry-After", method, route.Pattern, resp.StatusCode, resp.Header.Get("Retry-After"))
			case route.Kind == routes.Browser && (!strings.HasPrefix(ct, "text/html") || !strings.Contains(string(body), "<h1>Temporarily unavailable</h1>")):
				t.Errorf("%s %s (a page): %s %q; want an HTML page", method, route.Pattern, ct, body)
			case route.Kind != routes.Browser && (ct != "application/json" || decodeError(t, body)["error"] != "temporarily_unavailable"):
				t.Errorf("%s %s: %s %q; want the JSON error", method, route.Pattern, ct, body)
			}
		}
	}
}

func TestPanicRecovery(t *testing.T) {
	f := newFixture(t, "in-process", nil)
	f.backends[routes.Authn].Respond = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui/login/late" {
			_, _ = io.WriteString(w, "partial")
			http.NewResponseController(w).Flush()
		}
		panic("boom")
	}
	client := edgetest.H2CClient(t)
	resp, body := get(t, client, f.url("/ui/login/early"), nil)
	if resp.StatusCode != 500 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "Something went wrong") {
		t.Fatalf("panic before writing, on a page: got %d %q; want 500 as an HTML page", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("500 lacks edge headers: %v", resp.Header)
	}
	// A panic after the response started must not look like a complete answer.
	req, _ := http.NewRequest(http.MethodGet, f.url("/ui/login/late"), nil)
	if resp, err := client.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("panic after writing: body read cleanly; want the stream aborted")
		}
	}
	if resp, _ := get(t, client, f.url("/oauth/v2/keys"), nil); resp.StatusCode != 200 {
		t.Fatalf("after panics: got %d; want 200", resp.StatusCode)
	}
	f.logs.waitFor(t, `"path":"/ui/login/early","status":500`)
	logs := f.logs.String()
	if !strings.Contains(logs, `"msg":"panic serving request"`) || !strings.Contains(logs, `"panic":"boom"`) {
		t.Fatalf("panic not logged:\n%s", logs)
	}
	var sawAccess bool
	for _, l := range f.logs.lines(t) {
		if l["msg"] == "request" && l["path"] == "/ui/login/early" && l["status"] == float64(500) {
			sawAccess = true
		}
	}
	if !sawAccess {
		t.Fatalf("no access log line with status 500 for the panic:\n%s", logs)
	}
}

// A handler that aborts its response with http.ErrAbortHandler (as the
// proxy does when the service's stream breaks) has the client's stream
// aborted too: gin's recovery, which takes that panic for a broken
// connection, must not end the response as if it were complete.
func TestAbortedResponseStaysAborted(t *testing.T) {
	f := newFixture(t, "in-process", nil)
	f.backends[routes.Directory].Respond = func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/late") {
			_, _ = io.WriteString(w, "partial")
			http.NewResponseController(w).Flush()
		}
		panic(http.ErrAbortHandler)
	}
	for name, client := range map[string]*http.Client{"h2c": edgetest.H2CClient(t), "http1": edgetest.HTTP1Client(t)} {
		for _, p := range []string{"/management/v1/early", "/management/v1/late"} {
			req, _ := http.NewRequest(http.MethodGet, f.url(p), nil)
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Errorf("%s %s: got a complete %d response; want the stream aborted", name, p, resp.StatusCode)
			}
		}
	}
	f.logs.waitFor(t, `"path":"/management/v1/late"`)
	if logs := f.logs.String(); strings.Contains(logs, "panic serving request") {
		t.Errorf("an aborted response was logged as a panic:\n%s", logs)
	}
	if resp, _ := get(t, edgetest.H2CClient(t), f.url("/oauth/v2/keys"), nil); resp.StatusCode != 200 {
		t.Fatalf("after aborted responses: got %d; want 200", resp.StatusCode)
	}
}

func TestStreamingAndTrailersThroughRouter(t *testing.T) {
	f := newFixture(t, "proxied", nil)
	firstRead := make(chan struct{})
	f.backends[routes.Directory].Respond = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "second\n")
		w.Header().Set("Grpc-Status", "0")
	}
	for name, client := range map[string]*http.Client{"h2c": edgetest.H2CClient(t), "http1": edgetest.HTTP1Client(t)} {
		t.Run(name, func(t *testing.T) {
			firstRead = make(chan struct{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
				f.url("/gatehouse.management.v1.ManagementService/ListUsers"), strings.NewReader("\x00\x00\x00\x00\x00"))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
				t.Fatalf("first message %q, %v; want it before the stream ends", line, err)
			}
			close(firstRead)
			if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
				t.Fatalf("rest %q, %v; want second", rest, err)
			}
			if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
				t.Fatalf("trailer Grpc-Status %q; want 0", got)
			}
			if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("streamed response lacks edge headers: %v", resp.Header)
			}
		})
	}
}

func TestStoppedServiceIs503(t *testing.T) {
	f := newFixture(t, "proxied", nil)
	f.servers[routes.Directory].Stop()
	resp, body := get(t, edgetest.HTTP1Client(t), f.url("/management/v1/users/me?token=SECRET"), nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("got %d Retry-After %q; want 503 and 5", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	e := decodeError(t, body)
	if e["error"] != "temporarily_unavailable" || e["error_description"] != "directory service unavailable" {
		t.Fatalf("got body %q", body)
	}
	if strings.Contains(f.logs.String(), "SECRET") {
		t.Fatalf("logs contain the query:\n%s", f.logs.String())
	}
	// The others still answer.
	if resp, _ := get(t, edgetest.HTTP1Client(t), f.url("/oauth/v2/keys"), nil); resp.StatusCode != 200 {
		t.Fatalf("tokens: got %d; want 200", resp.StatusCode)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	all := func() map[routes.Service]http.Handler {
		m := map[routes.Service]http.Handler{}
		for _, s := range routes.Services() {
			m[s] = http.NotFoundHandler()
		}
		return m
	}
	missing := all()
	delete(missing, routes.Directory)
	cases := map[string]Options{
		"missing service": {Services: missing},
		"bad proxy":       {Services: all(), TrustedProxies: []string{"10.0.0.0/33"}},
		"bad proxy word":  {Services: all(), TrustedProxies: []string{"localhost"}},
		"negative limit":  {Services: all(), MaxBodyBytes: -1},
		"metadata limit":  {Services: all(), Limiters: map[routes.Class]ratelimit.Limiter{routes.ClassMetadata: failingLimiter{}}},
		"unknown class":   {Services: all(), Limiters: map[routes.Class]ratelimit.Limiter{"nonsense": failingLimiter{}}},
	}
	for name, o := range cases {
		if _, err := New(o); err == nil {
			t.Errorf("%s: got nil error", name)
		}
	}
	if _, err := New(Options{Services: all()}); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
