package router

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

func basic(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(user) + ":" + url.QueryEscape(password)))
}

// assertion is an unsigned JWT whose subject is sub: edge reads it unverified.
func assertion(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"iss":"`+sub+`","sub":"`+sub+`","aud":"x"}`)) + ".c2ln"
}

// rejections records the router's Rejected calls.
type rejections struct {
	mu  sync.Mutex
	got []string
}

func (r *rejections) add(_ context.Context, class routes.Class, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, string(class)+"/"+key)
}

func (r *rejections) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// classTraffic sends the requests of each class a test needs.
type classTraffic struct {
	t      *testing.T
	f      *fixture
	client *http.Client
	from   string // X-Forwarded-For (the fixture trusts loopback), if set
}

func (c classTraffic) do(method, p string, body string, header map[string]string) int {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.f.url(p), rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if c.from != "" {
		req.Header.Set("X-Forwarded-For", c.from)
	}
	resp, _ := edgetest.Do(c.t, c.client, req)
	return resp.StatusCode
}

func (c classTraffic) browser() int { return c.do(http.MethodGet, "/ui/login", "", nil) }

func (c classTraffic) introspect(clientID string) int {
	return c.do(http.MethodPost, "/oauth/v2/introspect", "token=abc",
		map[string]string{"Authorization": "Basic " + basic(clientID, "secret")})
}

func (c classTraffic) token(form url.Values) int {
	return c.do(http.MethodPost, "/oauth/v2/token", form.Encode(), nil)
}

func (c classTraffic) api(tok string) int {
	return c.do(http.MethodPost, "/management/v1/users/_search", "", map[string]string{"Authorization": "Bearer " + tok})
}

// classLimiters builds one limiter per class from newLimiter(rate, burst).
type newLimiterFunc func(t *testing.T, perSecond float64, burst int) ratelimit.Limiter

func memoryLimiter(t *testing.T, perSecond float64, burst int) ratelimit.Limiter {
	return frozenMemory(t, perSecond, burst)
}

func redisLimiter(t *testing.T, perSecond float64, burst int) ratelimit.Limiter {
	rdb, prefix := testutil.Redis(t)
	l, err := ratelimit.NewRedis(rdb, prefix, max(int(perSecond), 1), burst, nil)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	return l
}

// TestRateLimitByClass: browser traffic, each OAuth client and each
// bearer token have budgets of their own, with either limiter.
func TestRateLimitByClass(t *testing.T) {
	limiters := map[string]newLimiterFunc{"memory": memoryLimiter, "redis": redisLimiter}
	for _, kind := range []string{"memory", "redis"} {
		for _, mode := range modes {
			t.Run(kind+"/"+mode, func(t *testing.T) {
				newLimiter := limiters[kind]
				rej := &rejections{}
				// Redis refills at 1/s at least: budgets small enough to
				// exhaust, and tests that never depend on a refill.
				f := newFixture(t, mode, func(o *Options) {
					o.Limiters = map[routes.Class]ratelimit.Limiter{
						routes.ClassBrowser: newLimiter(t, 1, 3),
						routes.ClassClient:  newLimiter(t, 1, 40),
						routes.ClassAPI:     newLimiter(t, 1, 3),
					}
					o.Rejected = rej.add
					o.TrustedProxies = []string{"127.0.0.1"}
				})
				c := classTraffic{t: t, f: f, client: edgetest.H2CClient(t)}

				// Browsers from this address use up their budget.
				untilLimited(t, "browser", 10, c.browser)

				// A backend on the same address introspects at its own
				// rate, well past the browser budget.
				for i := range 30 {
					if code := c.introspect("resource-server"); code != 200 {
						t.Fatalf("introspection %d from the browsers' address: got %d; want 200", i, code)
					}
				}
				// (Redis refills a token a second: on a slow machine the
				// browsers may have one back by now.)
				if code := c.browser(); code != http.StatusTooManyRequests && kind == "memory" {
					t.Fatalf("browser after the introspections: got %d; want still 429", code)
				}

				// A client hammering the token endpoint is limited; other
				// clients on the same address are not, however they name
				// themselves, and neither is a request naming no client.
				hammer := url.Values{"grant_type": {"client_credentials"}, "client_id": {"hammer"}, "client_secret": {"s"}}
				limited := 0
				for range 50 {
					if c.token(hammer) == http.StatusTooManyRequests {
						limited++
					}
				}
				if limited < 10 {
					t.Fatalf("50 token requests of one client at burst 40: %d limited; want at least 10", limited)
				}
				others := map[string]int{
					"client_id":        c.token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"quiet"}, "client_secret": {"s"}}),
					"Basic":            c.introspect("other"),
					"client_assertion": c.token(url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion("signed-client")}}),
					"no client":        c.token(url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {"x"}}),
				}
				for how, code := range others {
					if code != 200 {
						t.Errorf("another client (%s) on the hammer's address: got %d; want 200", how, code)
					}
				}
				// The id is unverified and public: naming it from another
				// address spends none of the budget it has there, so no one
				// can shut a relying party's token endpoint.
				elsewhere := c
				elsewhere.from = "198.51.100.7"
				if code := elsewhere.token(hammer); code != 200 {
					t.Errorf("the hammered client's id from another address: got %d; want 200", code)
				}

				// Bearer tokens likewise.
				untilLimited(t, "token-one", 10, func() int { return c.api("token-one") })
				if code := c.api("token-two"); code != 200 {
					t.Errorf("another bearer token: got %d; want 200", code)
				}

				// Discovery and the key set are never limited.
				for i := range 20 {
					for _, p := range []string{"/oauth/v2/keys", "/.well-known/openid-configuration"} {
						if code := c.do(http.MethodGet, p, "", nil); code != 200 {
							t.Fatalf("%s, request %d: got %d; want 200", p, i, code)
						}
					}
				}

				got := rej.list()
				for _, want := range []string{"browser/address", "client/client", "api/token"} {
					if !slices.Contains(got, want) {
						t.Errorf("rejections %q; want one of %s", got, want)
					}
				}
				for _, r := range got {
					if strings.HasPrefix(r, "metadata/") || r == "client/address" {
						t.Errorf("rejection %s: that budget was never exhausted", r)
					}
				}
			})
		}
	}
}

// TestRateLimitFormReachesServiceUnchanged: reading client_id leaves the
// body as the client sent it, whatever its length or framing.
func TestRateLimitFormReachesServiceUnchanged(t *testing.T) {
	long := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Repeat("s ", 3000)}, "client_id": {"late"}}.Encode()
	bodies := map[string]string{
		"short":                "grant_type=client_credentials&client_id=app-1&client_secret=s%26x",
		"client_id late":       long,
		"client_id after junk": strings.Repeat("a", 300) + "&client_id=x",
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) {
				o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassClient: frozenMemory(t, 1, 100)}
				o.MaxBodyBytes = 8 << 10
			})
			for name, body := range bodies {
				for _, chunked := range []bool{false, true} {
					req, _ := http.NewRequest(http.MethodPost, f.url("/oauth/v2/token"), strings.NewReader(body))
					if chunked {
						req, _ = http.NewRequest(http.MethodPost, f.url("/oauth/v2/token"), io.MultiReader(strings.NewReader(body)))
					}
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					resp, _ := edgetest.Do(t, edgetest.HTTP1Client(t), req)
					if resp.StatusCode != 200 {
						t.Fatalf("%s (chunked %v): got %d; want 200", name, chunked, resp.StatusCode)
					}
					if got := f.backends[routes.Tokens].Last(t).Body; string(got) != body {
						t.Fatalf("%s (chunked %v): the service got %d bytes %.80q…; want the %d sent", name, chunked, len(got), got, len(body))
					}
				}
			}
			// The body limit still holds for a form edge has peeked into.
			req, _ := http.NewRequest(http.MethodPost, f.url("/oauth/v2/token"), io.MultiReader(strings.NewReader("client_id=a&x="+strings.Repeat("x", 9<<10))))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if resp, _ := edgetest.Do(t, edgetest.HTTP1Client(t), req); resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("peeked form over the body limit: got %d; want 413", resp.StatusCode)
			}
		})
	}
}

// TestRateLimitAddressCap: one address cannot multiply its budget by
// naming new clients, and a client over its own limit does not use up the
// cap its neighbours share.
func TestRateLimitAddressCap(t *testing.T) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			newLimiter := map[string]newLimiterFunc{"memory": memoryLimiter, "redis": redisLimiter}[kind]
			rej := &rejections{}
			f := newFixture(t, "in-process", func(o *Options) {
				o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassClient: newLimiter(t, 1, 2), routes.ClassAPI: newLimiter(t, 1, 2)}
				o.AddressCap = newLimiter(t, 1, 6)
				o.Rejected = rej.add
			})
			c := classTraffic{t: t, f: f, client: edgetest.HTTP1Client(t)}
			for range 10 {
				c.introspect("greedy") // 2 allowed, the rest denied by its own budget
			}
			for i, id := range []string{"a", "b", "c", "d"} { // 2 + 4 = the cap of 6
				if code := c.introspect(id); code != 200 {
					t.Fatalf("client %s (%d more after greedy's 2): got %d; want 200", id, i+1, code)
				}
			}
			if code := c.introspect("e"); code != http.StatusTooManyRequests {
				t.Fatalf("a 7th request under a new client id: got %d; want 429 from the address cap", code)
			}
			if code := c.api("fresh-token"); code != http.StatusTooManyRequests {
				t.Fatalf("a new bearer token from the capped address: got %d; want 429", code)
			}
			// Requests keyed by address have that budget already.
			if code := c.token(url.Values{"grant_type": {"password"}}); code != 200 {
				t.Fatalf("a token request naming no client: got %d; want 200 (its own address budget)", code)
			}
			got := rej.list()
			if !slices.Contains(got, "client/client") || !slices.Contains(got, "client/address_cap") || !slices.Contains(got, "api/address_cap") {
				t.Fatalf("rejections %q; want client/client, client/address_cap and api/address_cap", got)
			}
		})
	}
}

func TestRateKeyByClass(t *testing.T) {
	form := func(body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/oauth/v2/token", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		return r
	}
	withHeader := func(r *http.Request, k, v string) *http.Request { r.Header.Set(k, v); return r }
	long := strings.Repeat("z", 200)
	cases := []struct {
		name  string
		class routes.Class
		req   *http.Request
		key   string
		by    string
	}{
		{"browser", routes.ClassBrowser, withHeader(form("client_id=a"), "Authorization", "Bearer t"), "ip4:192.0.2.1", byAddress},
		{"Basic", routes.ClassClient, withHeader(form("client_id=b"), "Authorization", "Basic "+basic("app:1/ü", "s")), "client:idh:" + hashHex("app:1/ü") + "@ip4:192.0.2.1", byClient},
		{"Basic, plain id", routes.ClassClient, withHeader(form(""), "Authorization", "Basic "+basic("app-1", "s")), "client:id:app-1@ip4:192.0.2.1", byClient},
		{"client_id", routes.ClassClient, form("grant_type=x&client_id=app%2D2&client_id=other"), "client:id:app-2@ip4:192.0.2.1", byClient},
		{"escaped parameter name", routes.ClassClient, form("client%5Fid=app-3"), "client:id:app-3@ip4:192.0.2.1", byClient},
		{"long client_id", routes.ClassClient, form("client_id=" + long), "client:idh:" + hashHex(long) + "@ip4:192.0.2.1", byClient},
		{"client_assertion", routes.ClassClient, form("client_assertion=" + assertion("app-4")), "client:id:app-4@ip4:192.0.2.1", byClient},
		{"broken assertion", routes.ClassClient, form("client_assertion=a.%%%.c"), "client:ip4:192.0.2.1", byAddress},
		{"no client", routes.ClassClient, form("grant_type=password"), "client:ip4:192.0.2.1", byAddress},
		{"JSON body", routes.ClassClient, withHeader(form(`{"client_id":"a"}`), "Content-Type", "application/json"), "client:ip4:192.0.2.1", byAddress},
		{"GET", routes.ClassClient, httptest.NewRequest(http.MethodGet, "/oauth/v2/token?client_id=a", nil), "client:ip4:192.0.2.1", byAddress},
		{"bearer", routes.ClassAPI, withHeader(form(""), "Authorization", "Bearer tok"), "api:tok:" + hashHex("tok"), byToken},
		{"DPoP", routes.ClassAPI, withHeader(form(""), "Authorization", "dpop tok"), "api:tok:" + hashHex("tok"), byToken},
		{"Basic on the API", routes.ClassAPI, withHeader(form(""), "Authorization", "Basic "+basic("a", "b")), "api:ip4:192.0.2.1", byAddress},
	}
	for _, c := range cases {
		key, by := rateKey(c.req, c.class, "192.0.2.1")
		if key != c.key || by != c.by {
			t.Errorf("%s: got %q by %s; want %q by %s", c.name, key, by, c.key, c.by)
		}
	}
}

func hashHex(s string) string { return tokenKey(s)[len("tok:"):] }

func TestPeekForm(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		length int64 // -1: unknown
		want   string
	}{
		{"whole", "a=1&client_id=x", 15, "a=1&client_id=x"},
		{"whole, unknown length", "a=1&client_id=x", -1, "a=1&client_id=x"},
		{"cut after the last complete parameter", "a=1&b=" + strings.Repeat("2", MaxPeekBytes), -1, "a=1"},
		{"declared longer than the peek", "a=1&b=" + strings.Repeat("2", MaxPeekBytes), int64(6 + MaxPeekBytes), "a=1"},
		{"one parameter longer than the peek", strings.Repeat("2", MaxPeekBytes+1), -1, ""},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(c.body)))
		r.ContentLength = c.length
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if got := string(peekForm(r, MaxPeekBytes)); got != c.want {
			t.Errorf("%s: got %.40q; want %.40q", c.name, got, c.want)
		}
		if rest, err := io.ReadAll(r.Body); err != nil || string(rest) != c.body {
			t.Errorf("%s: body afterwards %d bytes, %v; want the %d bytes unchanged", c.name, len(rest), err, len(c.body))
		}
	}

	// A read error reaches the service after the bytes that were read.
	boom := errors.New("connection reset")
	r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("a=1&client_id=x&c"), errReader{boom}))
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if got := string(peekForm(r, MaxPeekBytes)); got != "a=1&client_id=x" {
		t.Errorf("read error: got %q; want the complete parameters", got)
	}
	if rest, err := io.ReadAll(r.Body); string(rest) != "a=1&client_id=x&c" || !errors.Is(err, boom) {
		t.Errorf("read error: body afterwards %q, %v; want the bytes read, then the error", rest, err)
	}
}

// untilLimited calls send until it answers 429, failing after n calls.
func untilLimited(t *testing.T, what string, n int, send func() int) {
	t.Helper()
	for range n {
		if send() == http.StatusTooManyRequests {
			return
		}
	}
	t.Fatalf("%s: %d requests, none limited", what, n)
}

// BenchmarkRateKey: what finding a request's key costs per class.
func BenchmarkRateKey(b *testing.B) {
	form := "grant_type=authorization_code&code=" + strings.Repeat("c", 43) +
		"&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&code_verifier=" + strings.Repeat("v", 43)
	cases := []struct {
		name   string
		class  routes.Class
		body   string
		header map[string]string
	}{
		{"browser", routes.ClassBrowser, "", nil},
		{"client/Basic", routes.ClassClient, form, map[string]string{"Authorization": "Basic " + basic("app-1", "secret")}},
		{"client/client_id", routes.ClassClient, form + "&client_id=app-1", nil},
		{"client/client_assertion", routes.ClassClient, form + "&client_assertion=" + assertion("app-1"), nil},
		{"api/bearer", routes.ClassAPI, "", map[string]string{"Authorization": "Bearer " + strings.Repeat("t", 800)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			header := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			for k, v := range c.header {
				header.Set(k, v)
			}
			body := strings.NewReader(c.body)
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(c.body)
				r := &http.Request{Method: http.MethodPost, Header: header, Body: io.NopCloser(body), ContentLength: int64(len(c.body))}
				if key, _ := rateKey(r, c.class, "192.0.2.1"); key == "" {
					b.Fatal("no key")
				}
			}
		})
	}
}

// A password submission costs an argon2id hash, and a server runs only a
// few at once: besides the browser budget, one address's POSTs of the
// password pages share a smaller budget, so it cannot keep the hashing
// slots busy for everyone (and other pages, other addresses and GETs of
// those pages are not charged to it).
func TestRateLimitPasswordSubmissions(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			rej := &rejections{}
			f := newFixture(t, mode, func(o *Options) {
				o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassBrowser: frozenMemory(t, 1, 100)}
				o.Password = frozenMemory(t, 1, 3)
				o.Rejected = rej.add
				o.TrustedProxies = []string{"127.0.0.1"}
			})
			c := classTraffic{t: t, f: f, client: edgetest.H2CClient(t), from: "198.51.100.1"}
			for _, p := range routes.PasswordPosts[:2] {
				if code := c.do(http.MethodPost, p, "password=x", nil); code != 200 {
					t.Fatalf("POST %s within the password budget: %d", p, code)
				}
			}
			c.do(http.MethodPost, routes.PasswordPosts[2], "password=x", nil)
			for _, p := range routes.PasswordPosts {
				if code := c.do(http.MethodPost, p, "password=x", nil); code != http.StatusTooManyRequests {
					t.Errorf("POST %s past the password budget: %d; want 429", p, code)
				}
			}
			for _, p := range []string{"/ui/login/login", "/ui/login/consent"} {
				if code := c.do(http.MethodPost, p, "loginName=x", nil); code != 200 {
					t.Errorf("POST %s (no password) with the password budget spent: %d; want 200", p, code)
				}
			}
			if code := c.do(http.MethodGet, routes.PasswordPosts[0], "", nil); code != 200 {
				t.Errorf("GET of the password page with the budget spent: %d; want 200", code)
			}
			other := c
			other.from = "198.51.100.2"
			if code := other.do(http.MethodPost, routes.PasswordPosts[0], "password=x", nil); code != 200 {
				t.Errorf("another address: %d; want 200", code)
			}
			if got := rej.list(); !slices.Contains(got, "browser/password") {
				t.Errorf("rejections %q; want browser/password", got)
			}
		})
	}
}

// A body must arrive within the body timeout: a client sending one a byte
// at a time does not hold edge's connection (nor a service's) for as long
// as it likes. The rate limiter's peek at a token request's form is bounded
// too.
func TestSlowBodyTimesOut(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) {
				o.BodyTimeout = 300 * time.Millisecond
				o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassClient: memoryLimiter(t, 100, 100)}
			})
			// A body that arrived whole is not cut off by the timeout, however
			// long the service then takes to answer. The slow answer is the
			// case under test and the deadline is a socket's, on the real
			// clock (no synctest bubble over real connections), so it sleeps.
			f.backends[routes.Tokens].Respond = func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(900 * time.Millisecond)
				_, _ = io.WriteString(w, "slow answer")
			}
			for _, client := range []*http.Client{edgetest.HTTP1Client(t), edgetest.H2CClient(t)} {
				req, _ := http.NewRequest(http.MethodPost, f.url("/oauth/v2/token"), strings.NewReader("grant_type=x&client_id=slow"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if resp, body := edgetest.Do(t, client, req); resp.StatusCode != 200 || string(body) != "slow answer" {
					t.Errorf("a slow answer to a whole body: %d %q; want 200 and the answer", resp.StatusCode, body)
				}
			}
			f.backends[routes.Tokens].Respond = nil
			for _, p := range []string{"/oauth/v2/token", "/management/v1/users/_search"} {
				conn, err := net.Dial("tcp", f.edge.Host)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ng", p, f.edge.Host)
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = io.ReadAll(conn) // the answer, then the close
				took := time.Since(start)
				conn.Close()
				if err != nil || took > 5*time.Second {
					t.Errorf("%s with a stalled body: %v after %s; want the connection ended about the 300ms timeout", p, err, took)
				}
			}
		})
	}
}
