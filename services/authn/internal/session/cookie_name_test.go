package session

import (
	"strings"
	"testing"
)

// The cookie's name tells apart issuers on one host name: browsers keep
// cookies by host, not by port or path. An issuer on its scheme's default
// port at the root keeps the plain name.
func TestCookieNameFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		issuer string
		secure bool
		want   string
	}{
		{"https://auth.example.com", true, "__Host-gatehouse_ua"},
		{"https://auth.example.com/", true, "__Host-gatehouse_ua"},
		{"http://localhost:8080", false, "gatehouse_ua_8080"},
		{"http://localhost:9090", false, "gatehouse_ua_9090"},
	} {
		if got := CookieNameFor(tc.issuer, tc.secure); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.issuer, got, tc.want)
		}
	}
	a, b := CookieNameFor("https://example.com:8443/tenant-a", true), CookieNameFor("https://example.com:8443/tenant-b", true)
	if !strings.HasPrefix(a, "__Host-gatehouse_ua_8443_") || len(a) != len("__Host-gatehouse_ua_8443_")+8 || a == b {
		t.Errorf("issuers with paths: %q and %q; want the port and a hash of the path, differing by path", a, b)
	}
}
