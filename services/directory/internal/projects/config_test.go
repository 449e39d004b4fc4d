package projects

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

func validWeb() OIDCConfig {
	c := OIDCConfig{RedirectURIs: []string{"https://app.example.com/cb"}, AppType: AppTypeWeb, AuthMethod: AuthBasic, AccessTokenType: AccessTokenOpaque}
	c.Normalize()
	return c
}

func fieldsOf(f apierr.Fields) []string {
	var out []string
	for _, e := range f {
		out = append(out, e.Field)
	}
	return out
}

func TestNormalizeDefaultsAndDedupes(t *testing.T) {
	c := OIDCConfig{RedirectURIs: []string{"https://a/cb", "https://a/cb"}, GrantTypes: []string{GrantRefreshToken, GrantAuthorizationCode, GrantRefreshToken}}
	c.Normalize()
	if !slices.Equal(c.ResponseTypes, []string{ResponseCode}) || !slices.Equal(c.GrantTypes, []string{GrantRefreshToken, GrantAuthorizationCode}) ||
		!slices.Equal(c.RedirectURIs, []string{"https://a/cb"}) {
		t.Fatalf("normalized = %+v", c)
	}
	d := OIDCConfig{RedirectURIs: []string{"https://a/cb"}, ResponseTypes: []string{ResponseCode}, GrantTypes: []string{GrantRefreshToken, GrantAuthorizationCode}}
	d.Normalize()
	if !c.Equal(&d) {
		t.Fatal("equal configurations compare unequal")
	}
	d.DevMode = true
	if c.Equal(&d) {
		t.Fatal("different configurations compare equal")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(*OIDCConfig)
		fields []string
	}{
		{"valid", func(*OIDCConfig) {}, nil},
		{"fragment", func(c *OIDCConfig) { c.RedirectURIs = []string{"https://a/cb#f"} }, []string{"redirect_uris[0]"}},
		{"empty fragment", func(c *OIDCConfig) { c.RedirectURIs = []string{"https://a/cb#"} }, []string{"redirect_uris[0]"}},
		{"relative", func(c *OIDCConfig) { c.RedirectURIs = []string{"//a/cb"} }, []string{"redirect_uris[0]"}},
		{"https without host", func(c *OIDCConfig) { c.RedirectURIs = []string{"https:/cb"} }, []string{"redirect_uris[0]"}},
		{"custom scheme is valid", func(c *OIDCConfig) { c.RedirectURIs = []string{"com.example:/cb"} }, nil},
		{"no redirect", func(c *OIDCConfig) { c.RedirectURIs = nil }, []string{"redirect_uris"}},
		{"post-logout may have no URIs", func(c *OIDCConfig) { c.PostLogoutRedirectURIs = nil }, nil},
		{"skew bound", func(c *OIDCConfig) { c.ClockSkew = 5 * time.Second }, nil},
		{"skew past bound", func(c *OIDCConfig) { c.ClockSkew = 5*time.Second + 1 }, []string{"clock_skew"}},
		{"device code beside code", func(c *OIDCConfig) { c.GrantTypes = append(c.GrantTypes, GrantDeviceCode) }, nil},
		{"device code alone, no redirect", func(c *OIDCConfig) { c.GrantTypes, c.RedirectURIs = []string{GrantDeviceCode}, nil }, nil},
		{"device code with refresh", func(c *OIDCConfig) { c.GrantTypes = []string{GrantDeviceCode, GrantRefreshToken} }, nil},
		{"token exchange", func(c *OIDCConfig) { c.GrantTypes = append(c.GrantTypes, GrantTokenExchange) }, nil},
		{"token exchange, public client", func(c *OIDCConfig) {
			c.GrantTypes, c.AuthMethod = append(c.GrantTypes, GrantTokenExchange), AuthNone
		}, []string{"grant_types"}},
		{"unknown grant", func(c *OIDCConfig) { c.GrantTypes = append(c.GrantTypes, "password") }, []string{"grant_types[1]"}},
		{"code without grant", func(c *OIDCConfig) { c.GrantTypes = []string{GrantImplicit} }, []string{"response_types"}},
		{"refresh alone", func(c *OIDCConfig) { c.GrantTypes = []string{GrantRefreshToken} }, []string{"response_types", "grant_types"}},
		{"login v2", func(c *OIDCConfig) { c.LoginVersion = "v2" }, []string{"login_version"}},
		{"bad enums", func(c *OIDCConfig) { c.AppType, c.AuthMethod, c.AccessTokenType = "x", "y", "z" },
			[]string{"app_type", "auth_method_type", "access_token_type"}},
		{"origin with query", func(c *OIDCConfig) { c.AdditionalOrigins = []string{"https://o.example.com?x"} }, []string{"additional_origins[0]"}},
		{"origin with user", func(c *OIDCConfig) { c.AdditionalOrigins = []string{"https://u@o.example.com"} }, []string{"additional_origins[0]"}},
		{"origin with port", func(c *OIDCConfig) { c.AdditionalOrigins = []string{"http://o.example.com:8080"} }, nil},
		{"back-channel custom scheme", func(c *OIDCConfig) { c.BackChannelLogoutURI = "app:/logout" }, []string{"back_channel_logout_uri"}},
		{"500-char URI", func(c *OIDCConfig) { c.RedirectURIs = []string{"https://a/" + strings.Repeat("x", 490)} }, nil},
		{"501-char URI", func(c *OIDCConfig) { c.RedirectURIs = []string{"https://a/" + strings.Repeat("x", 491)} }, []string{"redirect_uris[0]"}},
	}
	for _, tc := range cases {
		c := validWeb()
		tc.mod(&c)
		var f apierr.Fields
		c.Validate(&f)
		if got := fieldsOf(f); !slices.Equal(got, tc.fields) {
			t.Errorf("%s: fields %v (%v); want %v", tc.name, got, f.Err("x"), tc.fields)
		}
	}
}

func TestCompliance(t *testing.T) {
	keys := func(ps []Problem) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Key)
		}
		return out
	}
	cases := []struct {
		name string
		mod  func(*OIDCConfig)
		want []string
	}{
		{"https web", func(*OIDCConfig) {}, nil},
		{"ipv6 loopback", func(c *OIDCConfig) { c.RedirectURIs = []string{"http://[::1]:8080/cb"} }, nil},
		{"http web", func(c *OIDCConfig) { c.RedirectURIs = []string{"http://a.example/cb"} }, []string{ProblemNotCompliant, ProblemHTTPOnlyForDevMode}},
		{"http native", func(c *OIDCConfig) {
			c.RedirectURIs, c.AppType, c.AuthMethod = []string{"http://a.example/cb"}, AppTypeNative, AuthNone
		},
			[]string{ProblemNotCompliant, ProblemNativeHTTPLocalhost}},
		{"http implicit", func(c *OIDCConfig) {
			c.RedirectURIs, c.GrantTypes = []string{"http://a.example/cb"}, []string{GrantImplicit}
		},
			[]string{ProblemNotCompliant, ProblemImplicitHTTPForbidden}},
		{"custom implicit native", func(c *OIDCConfig) {
			c.RedirectURIs, c.GrantTypes, c.AppType, c.AuthMethod = []string{"app:/cb"}, []string{GrantImplicit}, AppTypeNative, AuthNone
		}, []string{ProblemNotCompliant, ProblemImplicitCustomScheme}},
		{"user agent with secret", func(c *OIDCConfig) { c.AppType = AppTypeUserAgent }, []string{ProblemNotCompliant, ProblemUserAgentAuthNotNone}},
		{"web with PKCE (ZITADEL allows it)", func(c *OIDCConfig) { c.AuthMethod = AuthNone }, nil},
	}
	for _, tc := range cases {
		c := validWeb()
		tc.mod(&c)
		if got := keys(c.Compliance()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestAllowedOrigins(t *testing.T) {
	c := OIDCConfig{RedirectURIs: []string{"https://a.example/cb", "https://a.example/other", "app:/cb", "http://localhost:3000/x"},
		AdditionalOrigins: []string{"https://b.example/", "https://a.example"}}
	want := []string{"https://a.example", "http://localhost:3000", "https://b.example"}
	if got := c.AllowedOrigins(); !slices.Equal(got, want) {
		t.Fatalf("AllowedOrigins = %v; want %v", got, want)
	}
}

func TestClientID(t *testing.T) {
	for name, slug := range map[string]string{"Web Shop": "web-shop", "  ": "project", "Ünïcode!": "n-code", strings.Repeat("ab", 40): strings.Repeat("ab", 25)} {
		id := clientID(name)
		if _, s, _ := strings.Cut(id, "@"); s != slug {
			t.Errorf("clientID(%q) = %q; want suffix @%s", name, id, slug)
		}
	}
	if a, b := clientID("x"), clientID("x"); a == b {
		t.Fatal("client ids repeat")
	}
}
