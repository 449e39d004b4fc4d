package netguard

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		ip                  string
		dflt, loopback, prv bool // allowed by default, with AllowLoopback, with DenyPrivate
	}{
		{"8.8.8.8", true, true, true},
		{"2001:4860:4860::8888", true, true, true},
		{"10.1.2.3", true, true, false},
		{"172.16.0.1", true, true, false},
		{"192.168.1.1", true, true, false},
		{"100.64.0.1", true, true, false},
		{"fd12:3456::1", true, true, false},
		{"127.0.0.1", false, true, false},
		{"127.8.9.10", false, true, false},
		{"::1", false, true, false},
		{"::ffff:127.0.0.1", false, true, false},
		{"169.254.169.254", false, false, false}, // cloud metadata
		{"::ffff:169.254.169.254", false, false, false},
		{"64:ff9b::a9fe:a9fe", false, false, false}, // NAT64 form of 169.254.169.254
		{"fd00:ec2::254", false, false, false},      // AWS metadata over IPv6
		{"fe80::1", false, false, false},
		{"0.0.0.0", false, false, false},
		{"::", false, false, false},
		{"0.1.2.3", false, false, false},
		{"224.0.0.1", false, false, false},
		{"ff02::1", false, false, false},
		{"255.255.255.255", false, false, false},
	} {
		ip := netip.MustParseAddr(tc.ip)
		for _, c := range []struct {
			p    Policy
			want bool
		}{{Policy{}, tc.dflt}, {Policy{AllowLoopback: true}, tc.loopback}, {Policy{DenyPrivate: true}, tc.prv}} {
			err := c.p.Check(ip)
			if (err == nil) != c.want || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Errorf("%+v.Check(%s) = %v; allowed %v", c.p, tc.ip, err, c.want)
			}
		}
	}
}

// The check applies to the dialled address: a server on loopback is
// refused unless the policy allows loopback, and so is a redirect there.
func TestClientDialsOnlyAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
		case "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	// "localhost" resolves to loopback: the name does not help.
	local := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	for _, u := range []string{srv.URL, local} {
		_, err := Policy{}.Client(Options{}).Get(u)
		if !errors.Is(err, ErrForbidden) {
			t.Errorf("GET %s with the default policy: %v; want ErrForbidden", u, err)
		}
	}
	c := Policy{AllowLoopback: true}.Client(Options{MaxBody: 1024})
	res, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(res.Body); string(b) != "ok" {
		t.Errorf("body %q", b)
	}
	res.Body.Close()
	res, err = c.Get(srv.URL + "/big")
	if err == nil {
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("2 KiB with a 1 KiB limit: %v; want ErrTooLarge", err)
	}
	if _, err := c.Get(srv.URL + "/file"); !errors.Is(err, ErrForbidden) {
		t.Errorf("redirect to file: %v; want ErrForbidden", err)
	}
}
