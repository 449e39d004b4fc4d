package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// tcpProxy forwards a local port to a target and can cut every
// connection and refuse new ones (down) and accept again (up) on the same
// port: a database outage and its recovery, seen from the client side.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.up()
	t.Cleanup(p.down)
	return p
}

func (p *tcpProxy) up() {
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatalf("proxy listen %s: %v", addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
}

func (p *tcpProxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialing
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); u.Close() }()
	_, _ = io.Copy(c, u)
	c.Close()
}

func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// TestDatabaseOutageIsUnavailable: while PostgreSQL cannot be reached, a
// valid admin token on the management API gets 503 UNAVAILABLE with
// Retry-After on every transport — never 401 or 403, which would make
// clients drop good credentials — and the same token works again once the
// database is back.
func TestDatabaseOutageIsUnavailable(t *testing.T) {
	dbURL := testutil.PostgresDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	p := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_DATABASE_URL": u.String(),
		"GATEHOUSE_MASTER_KEY":   base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32)),
	})
	kf, tok := operatorToken(t, p.base, dir, issuer)
	token := tok["access_token"].(string)
	if status, body := restJSON(t, "GET", p.base+"/management/v1/orgs/me", token, nil); status != 200 {
		t.Fatalf("before the outage: %d %v", status, body)
	}

	// An API app that introspects and revokes with a secret.
	status, proj := restJSON(t, "POST", p.base+"/management/v1/projects", token, map[string]any{"name": "Shop"})
	if status != 200 {
		t.Fatalf("AddProject: %d %v", status, proj)
	}
	status, api := restJSON(t, "POST", p.base+"/management/v1/projects/"+str(proj["id"])+"/apps/api", token,
		map[string]any{"name": "orders", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	if status != 200 {
		t.Fatalf("AddAPIApp: %d %v", status, api)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(str(api["clientId"]))+":"+url.QueryEscape(str(api["clientSecret"]))))

	proxy.down()
	calls := []struct {
		name, method, path, body string
		hdr                      map[string]string
	}{
		{"REST", "GET", "/management/v1/orgs/me", "", nil},
		{"REST list", "POST", "/management/v1/users/_search", "{}", map[string]string{"Content-Type": "application/json"}},
		{"Connect", "POST", "/gatehouse.management.v1.ManagementService/GetMyOrg", "{}",
			map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}},
	}
	for _, c := range calls {
		deadline := time.Now().Add(20 * time.Second)
		for {
			hdr := map[string]string{"Authorization": "Bearer " + token}
			for k, v := range c.hdr {
				hdr[k] = v
			}
			res, body := do(t, c.method, p.base+c.path, strings.NewReader(c.body), hdr)
			if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
				t.Fatalf("%s during the outage: %d %s; a valid token must never be refused for a database outage", c.name, res.StatusCode, body)
			}
			if res.StatusCode == http.StatusServiceUnavailable {
				if res.Header.Get("Retry-After") == "" {
					t.Fatalf("%s: 503 without Retry-After: %s", c.name, body)
				}
				if !strings.Contains(strings.ToLower(body), "unavailable") {
					t.Fatalf("%s: 503 body %s; want the UNAVAILABLE code", c.name, body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s during the outage: %d %s; want 503", c.name, res.StatusCode, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// The OAuth endpoints: a valid assertion and a valid token are not
	// refused either.
	oauthCalls := []struct {
		name string
		do   func() (*http.Response, string)
	}{
		{"token (JWT profile)", func() (*http.Response, string) {
			form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {jwtProfileAssertion(t, kf, issuer)},
				"scope": {"openid"}}
			return do(t, "POST", p.base+"/oauth/v2/token", strings.NewReader(form.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}},
		{"introspection", func() (*http.Response, string) {
			return do(t, "POST", p.base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()),
				map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic})
		}},
		{"revocation", func() (*http.Response, string) {
			return do(t, "POST", p.base+"/oauth/v2/revoke", strings.NewReader(url.Values{"token": {"some-token"}}.Encode()),
				map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic})
		}},
		{"authorize", func() (*http.Response, string) {
			return do(t, "GET", p.base+"/oauth/v2/authorize?"+url.Values{"client_id": {"gatehouse-cli"}, "redirect_uri": {"http://127.0.0.1:1/callback"},
				"response_type": {"code"}, "scope": {"openid"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}}.Encode(), nil, nil)
		}},
		{"userinfo", func() (*http.Response, string) {
			return do(t, "GET", p.base+"/oidc/v1/userinfo", nil, map[string]string{"Authorization": "Bearer " + token})
		}},
	}
	for _, c := range oauthCalls {
		res, body := c.do()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s during the outage: %d (Retry-After %q) %s; want 503 with Retry-After", c.name, res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	}

	proxy.up()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := restJSON(t, "GET", p.base+"/management/v1/orgs/me", token, nil)
		if status == 200 {
			break
		}
		if status == 401 || status == 403 || time.Now().After(deadline) {
			t.Fatalf("after the outage: %d %v", status, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRedisUnreachableRateLimitFallsBack: with Redis unreachable the rate
// limit still holds (each edge in process), /readyz stays 200 and says
// so, and go-redis's complaints come out as JSON log lines. Discovery and
// the key set, never limited, stay cacheable, and the rejections are
// counted by class on /metrics.
func TestRedisUnreachableRateLimitFallsBack(t *testing.T) {
	closed := freeAddr(t) // nothing listens there
	metricsAddr := freeAddr(t)
	p := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": t.TempDir(), "GATEHOUSE_REDIS_URL": "redis://" + closed + "/0",
		"GATEHOUSE_RATE_LIMIT": "1", "GATEHOUSE_RATE_BURST": "3", "GATEHOUSE_METRICS_ADDR": metricsAddr,
	})
	limited := false
	for i := 0; i < 10 && !limited; i++ {
		res, _ := do(t, "GET", p.base+"/oauth/v2/authorize", nil, nil)
		limited = res.StatusCode == http.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("with Redis unreachable, 10 requests at a limit of 1/s burst 3 were all allowed")
	}
	for i := range 10 {
		for _, path := range []string{"/.well-known/openid-configuration", "/oauth/v2/keys"} {
			res, _ := do(t, "GET", p.base+path, nil, nil)
			if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Cache-Control"), "public, max-age=") {
				t.Fatalf("%s, request %d after the browser budget ran out: %d, Cache-Control %q; want 200, public, max-age",
					path, i, res.StatusCode, res.Header.Get("Cache-Control"))
			}
		}
	}
	if _, body := do(t, "GET", "http://"+metricsAddr+"/metrics", nil, nil); !regexp.MustCompile(
		`gatehouse_edge_ratelimit_rejected_total\{[^}]*class="browser",key="address"[^}]*\} [1-9]`).MatchString(body) {
		t.Fatalf("/metrics has no browser rejections:\n%s", body)
	}
	res, body := do(t, "GET", p.base+"/readyz", nil, nil)
	if res.StatusCode != 200 || !strings.Contains(body, "fallback: memory") {
		t.Fatalf("/readyz: %d %s; want 200 with the rate limiter's fallback in details", res.StatusCode, body)
	}
	if !strings.Contains(p.log.String(), "rate limiter store unavailable") {
		t.Fatalf("no warning about the fallback:\n%s", p.log)
	}
	for _, line := range strings.Split(strings.TrimSpace(p.log.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Fatalf("a log line is not JSON: %q", line)
		}
	}
}
