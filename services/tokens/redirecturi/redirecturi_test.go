package redirecturi_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/redirecturi"
)

func TestMatch(t *testing.T) {
	registered := []string{
		"http://127.0.0.1/callback",
		"http://[::1]/callback",
		"http://127.0.0.1:8080/with-port",
		"http://127.0.0.1/q?tenant=a",
		"http://localhost/callback",
		"https://127.0.0.1/secure",
		"https://rp.example/cb",
		"com.example.app:/oauth2redirect",
	}
	cases := []struct {
		name      string
		requested string
		native    bool // the result for a native app; other apps match only exactly
		exact     bool
	}{
		// Exact matches, for every app type.
		{"exact loopback", "http://127.0.0.1/callback", true, true},
		{"exact https", "https://rp.example/cb", true, true},
		{"exact custom scheme", "com.example.app:/oauth2redirect", true, true},

		// RFC 8252 §7.3: any port on a registered loopback IP literal.
		{"IPv4, a port", "http://127.0.0.1:53121/callback", true, false},
		{"IPv4, the highest port", "http://127.0.0.1:65535/callback", true, false},
		{"IPv6, a port", "http://[::1]:53121/callback", true, false},
		{"registered with a port, another port", "http://127.0.0.1:9999/with-port", true, false},
		{"registered with a port, no port", "http://127.0.0.1/with-port", true, false},
		{"with the registered query", "http://127.0.0.1:4000/q?tenant=a", true, false},

		// Everything but the port must be the registered string.
		{"other path", "http://127.0.0.1:53121/other", false, false},
		{"longer path", "http://127.0.0.1:53121/callback/x", false, false},
		{"trailing slash", "http://127.0.0.1:53121/callback/", false, false},
		{"path case", "http://127.0.0.1:53121/Callback", false, false},
		{"escaped path", "http://127.0.0.1:53121/%63allback", false, false},
		{"added query", "http://127.0.0.1:53121/callback?x=1", false, false},
		{"other query", "http://127.0.0.1:4000/q?tenant=b", false, false},
		{"dropped query", "http://127.0.0.1:4000/q", false, false},
		{"IPv4 registered, IPv6 requested", "http://[::1]:53121/with-port", false, false},
		{"fragment", "http://127.0.0.1:53121/callback#x", false, false},
		{"empty fragment", "http://127.0.0.1:53121/callback#", false, false},
		{"userinfo", "http://user@127.0.0.1:53121/callback", false, false},
		{"userinfo after the port", "http://127.0.0.1:53121@evil.example/callback", false, false},
		{"host with the loopback as prefix", "http://127.0.0.1.evil.example/callback", false, false},
		{"other loopback address", "http://127.0.0.2:53121/callback", false, false},
		{"localhost gets no exception", "http://localhost:53121/callback", false, false},
		{"https gets no exception", "https://127.0.0.1:53121/secure", false, false},
		{"upper-case scheme", "HTTP://127.0.0.1:53121/callback", false, false},
		{"port 0", "http://127.0.0.1:0/callback", false, false},
		{"port out of range", "http://127.0.0.1:65536/callback", false, false},
		{"port with a leading zero", "http://127.0.0.1:080/callback", false, false},
		{"signed port", "http://127.0.0.1:+80/callback", false, false},
		{"empty port", "http://127.0.0.1:/callback", false, false},
		{"IPv6 without brackets", "http://::1:53121/callback", false, false},
		{"unregistered https", "https://evil.example/callback", false, false},
		{"empty", "", false, false},
	}
	for _, tc := range cases {
		if got := redirecturi.Match(registered, tc.requested, true); got != tc.native {
			t.Errorf("%s: Match(%q, native) = %v; want %v", tc.name, tc.requested, got, tc.native)
		}
		if got := redirecturi.Match(registered, tc.requested, false); got != tc.exact {
			t.Errorf("%s: Match(%q, not native) = %v; want %v", tc.name, tc.requested, got, tc.exact)
		}
	}
}

func TestRegistered(t *testing.T) {
	c := &directoryv1.Client{RedirectUris: []string{"http://127.0.0.1/callback"}}
	for _, tc := range []struct {
		appType string
		want    bool
	}{{"native", true}, {"web", false}, {"user_agent", false}, {"", false}} {
		c.AppType = tc.appType
		if got := redirecturi.Registered(c, "http://127.0.0.1:40000/callback"); got != tc.want {
			t.Errorf("app type %q: %v; want %v", tc.appType, got, tc.want)
		}
		if !redirecturi.Registered(c, "http://127.0.0.1/callback") {
			t.Errorf("app type %q: the exact URI is refused", tc.appType)
		}
	}
}

// FuzzMatch: whatever a native app's request carries, an accepted URI that
// is not registered verbatim is an http URI on a loopback IP literal
// without userinfo or fragment, and without its port is a registered URI.
func FuzzMatch(f *testing.F) {
	registered := []string{"http://127.0.0.1/callback", "http://[::1]:8080/cb?x=1"}
	for _, s := range []string{"http://127.0.0.1:1234/callback", "http://[::1]/cb?x=1", "http://127.0.0.1:1@a/callback",
		"http://127.0.0.1:99999/callback", "http://localhost:1/callback", "http://127.0.0.1:5/callback#"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, requested string) {
		if !redirecturi.Match(registered, requested, true) || slices.Contains(registered, requested) {
			return
		}
		u, err := url.Parse(requested)
		if err != nil || u.Scheme != "http" || u.User != nil || u.Fragment != "" || strings.Contains(requested, "#") ||
			(u.Hostname() != "127.0.0.1" && u.Hostname() != "::1") {
			t.Fatalf("accepted %q (%v)", requested, err)
		}
		withoutPort := stripPort(u)
		for _, r := range registered {
			if rr, _ := url.Parse(r); stripPort(rr) == withoutPort {
				return
			}
		}
		t.Fatalf("accepted %q, which without its port (%s) is not registered", requested, withoutPort)
	})
}

// stripPort renders u without its port.
func stripPort(u *url.URL) string {
	c := *u
	c.Host = u.Hostname()
	if strings.Contains(c.Host, ":") {
		c.Host = "[" + c.Host + "]"
	}
	return c.String()
}
