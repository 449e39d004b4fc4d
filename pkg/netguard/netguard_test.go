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
	t.Parallel()
	for _, tc := range []struct {
		ip                  string
		dflt, loopback, prv bool // allowed by default, with AllowLoopback, with AllowPrivate
	}{
		{"8.8.8.8", true, true, true},
		{"2001:4860:4860::8888", true, true, true},
		{"10.1.2.3", false, false, true},
		{"172.16.0.1", false, false, true},
		{"192.168.1.1", false, false, true},
		{"100.64.0.1", false, false, true},
		{"fd12:3456::1", false, false, true},
		{"::ffff:10.1.2.3", false, false, true},
		{"64:ff9b::a01:203", false, false, true}, // NAT64 form of 10.1.2.3
		{"127.0.0.1", false, true, false},
		{"127.8.9.10", false, true, false},
		{"::1", false, true, false},
		{"::ffff:127.0.0.1", false, true, false},
		{"169.254.169.254", false, false, false}, // cloud metadata
		{"::ffff:169.254.169.254", false, false, false},
		{"64:ff9b::a9fe:a9fe", false, false, false}, // NAT64 form of 169.254.169.254
		{"fd00:ec2::254", false, false, false},      // AWS metadata over IPv6
		{"fd00:ec2::254%eth0", false, false, false},
		{"100.100.100.200", false, false, false}, // Alibaba Cloud metadata
		{"::ffff:100.100.100.200", false, false, false},
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
		}{{Policy{}, tc.dflt}, {Policy{AllowLoopback: true}, tc.loopback}, {Policy{AllowPrivate: true}, tc.prv}} {
			err := c.p.Check(ip)
			if (err == nil) != c.want || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Errorf("%+v.Check(%s) = %v; allowed %v", c.p, tc.ip, err, c.want)
			}
		}
	}
}

// An allow-list lifts the refusal of the private ranges it names, and of
// every private address its host names resolve to; never of loopback or
// metadata addresses, which stay refused even inside an allowed range.
func TestAllowList(t *testing.T) {
	t.Parallel()
	prefixes, hosts, err := ParseAllow(" 10.0.0.0/8, 100.64.0.0/10,fd00::/8, 192.168.7.7, IdP.Corp.Internal. ,")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Allow: prefixes, AllowHosts: hosts}
	for _, tc := range []struct {
		host, ip string
		want     bool
	}{
		{"", "10.9.8.7", true},
		{"", "::ffff:10.9.8.7", true},
		{"", "192.168.7.7", true},
		{"", "192.168.7.8", false},
		{"", "172.16.0.1", false},
		{"", "100.64.1.1", true},
		{"", "100.100.100.200", false}, // metadata inside an allowed range
		{"", "fd00:ec2::254", false},   // likewise
		{"", "fd12::1", true},
		{"", "fc00::1", false},
		{"", "127.0.0.1", false},
		{"idp.corp.internal", "172.16.0.1", true},
		{"IDP.corp.internal.", "fc00::1", true},
		{"idp.corp.internal", "127.0.0.1", false},
		{"idp.corp.internal", "169.254.169.254", false},
		{"idp.corp.internal", "100.100.100.200", false},
		{"idp.corp.internal", "8.8.8.8", true},
		{"other.corp.internal", "172.16.0.1", false},
		{"sub.idp.corp.internal", "172.16.0.1", false},
	} {
		err := p.CheckHost(tc.host, netip.MustParseAddr(tc.ip))
		if (err == nil) != tc.want || (err != nil && !errors.Is(err, ErrForbidden)) {
			t.Errorf("CheckHost(%q, %s) = %v; allowed %v", tc.host, tc.ip, err, tc.want)
		}
	}
	// The dialer checks each resolved address against the name dialled.
	if err := p.control("idp.corp.internal")("tcp4", "172.16.0.1:443", nil); err != nil {
		t.Errorf("allowed name resolving to a private address: %v", err)
	}
	if err := p.control("evil.example")("tcp4", "172.16.0.1:443", nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("other name resolving to a private address: %v; want ErrForbidden", err)
	}
	if err := p.control("idp.corp.internal")("tcp6", "[fd00:ec2::254]:443", nil); !errors.Is(err, ErrForbidden) {
		t.Errorf("allowed name resolving to a metadata address: %v; want ErrForbidden", err)
	}
	for _, bad := range []string{"127.0.0.0/8", "8.8.8.0/24", "10.0.0.0/7", "169.254.0.0/16", "0.0.0.0/0", "::/0", "10.0.0.0/33",
		"*.corp.internal", "idp_corp", "fe80::1%eth0", "-idp.example"} {
		if _, _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) succeeded; want an error", bad)
		}
	}
}

// CheckURL judges a literal address before anything is dialled and leaves
// names to the dialer.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	p := Policy{AllowLoopback: true}
	for raw, want := range map[string]bool{
		"https://idp.example.com":           true,
		"https://10.0.0.1/realms/x":         false,
		"https://[fd00:ec2::254]:8443":      false,
		"http://100.100.100.200/latest":     false,
		"https://[::ffff:192.168.0.1]/":     false,
		"http://127.0.0.1:9000":             true,
		"https://8.8.8.8":                   true,
		"https://metadata.google.internal/": true, // a name: checked when dialled
	} {
		if err := p.CheckURL(raw); (err == nil) != want || (err != nil && !errors.Is(err, ErrForbidden)) {
			t.Errorf("CheckURL(%s) = %v; allowed %v", raw, err, want)
		}
	}
	if err := (Policy{}).CheckURL("http://127.0.0.1:9000"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("loopback with the default policy: %v; want the loopback rule named", err)
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
