package router

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

func testRedisClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestClientFromForwardedFor(t *testing.T) {
	set, err := parseTrusted([]string{"10.0.0.0/8", "192.0.2.1", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	peer := netip.MustParseAddr("10.0.0.1")
	cases := []struct {
		xff  []string
		want string
	}{
		{nil, "10.0.0.1"},
		{[]string{"198.51.100.1"}, "198.51.100.1"},
		{[]string{"6.6.6.6, 198.51.100.1, 10.2.3.4"}, "198.51.100.1"},
		{[]string{"6.6.6.6", "198.51.100.1, 10.2.3.4"}, "198.51.100.1"},
		{[]string{"10.9.9.9, 10.2.3.4"}, "10.9.9.9"},
		{[]string{"garbage, 10.2.3.4"}, "10.2.3.4"},
		{[]string{"198.51.100.1:4711"}, "198.51.100.1"},
		{[]string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{[]string{"::ffff:198.51.100.1"}, "198.51.100.1"},
	}
	for _, c := range cases {
		if got := set.client(peer, true, c.xff).String(); got != c.want {
			t.Errorf("xff %q: got %s; want %s", c.xff, got, c.want)
		}
	}
	if got := set.client(netip.MustParseAddr("203.0.113.1"), false, []string{"198.51.100.1"}).String(); got != "203.0.113.1" {
		t.Errorf("untrusted peer: got %s; want the peer", got)
	}
	if !set.contains(netip.MustParseAddr("192.0.2.1")) || set.contains(netip.MustParseAddr("192.0.2.2")) {
		t.Error("a single address must be trusted as a /32")
	}
}

func TestAddressKey(t *testing.T) {
	cases := map[string]string{
		"198.51.100.1":         "ip4:198.51.100.1",
		"2001:db8:1:2:3:4:5:6": "ip6:2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::9": "ip6:2001:db8:1:2::/64",
		"@":                    "addr:@",
	}
	for in, want := range cases {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestCanonical(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/a/b": true, "/a/b/": true, "/a//b": false, "/a/../b": false, "/a/./b": false,
		"/a/b/..": false, "/a/b/.": false, "a": false,
	} {
		if got := canonical(p); got != want {
			t.Errorf("canonical(%q) = %v; want %v", p, got, want)
		}
	}
}

func TestSaneRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"": false, "a": true, "A-b_c.9": true, "a b": false, "a/b": false, "é": false,
	} {
		if got := saneRequestID(id); got != want {
			t.Errorf("saneRequestID(%q) = %v; want %v", id, got, want)
		}
	}
}

func TestRegisterMethodSpecificRoute(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	ok := func(c *gin.Context) { c.Status(http.StatusAccepted) }
	route := routes.Route{Method: http.MethodPost, Pattern: "/x/*", Service: routes.Tokens, Kind: routes.OAuth}
	if err := register(e, route, []gin.HandlerFunc{ok}); err != nil {
		t.Fatalf("register: %v", err)
	}
	for method, want := range map[string]int{
		http.MethodPost: http.StatusAccepted, http.MethodOptions: http.StatusAccepted, http.MethodGet: http.StatusNotFound,
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(method, "/x/y", nil))
		if rec.Code != want {
			t.Errorf("%s /x/y: got %d; want %d", method, rec.Code, want)
		}
	}
	// A conflicting pattern is an error, not a panic.
	if err := register(e, routes.Route{Method: http.MethodPost, Pattern: "/x/*"}, []gin.HandlerFunc{ok}); err == nil {
		t.Error("duplicate registration: got nil error")
	}
}
