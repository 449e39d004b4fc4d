package service

import (
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

func load(t *testing.T, vars map[string]string) (*Settings, error) {
	t.Helper()
	c, err := config.Load(config.RoleEdge, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	return config.Get[*Settings](c)
}

func TestSettingsDefaultsAndFloors(t *testing.T) {
	t.Parallel()
	c, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimit != 50 || c.RateBurst != 100 || c.ClientRate != (RateBudget{200, 400}) || c.APIRate != (RateBudget{100, 200}) ||
		c.AddressCapRate != (RateBudget{1000, 2000}) || c.PasswordRate != (RateBudget{5, 20}) || c.RateLimitFallback != "memory" {
		t.Fatalf("rate limits: %+v; want 50/100, client 200/400, api 100/200, cap 1000/2000, password 5/20, memory", c)
	}
	c, err = load(t, map[string]string{"GATEHOUSE_RATE_LIMIT_CLIENT": "0", "GATEHOUSE_RATE_LIMIT_API": "2.5", "GATEHOUSE_RATE_BURST_API": "7"})
	if err != nil || c.ClientRate.PerSecond != 0 || c.APIRate != (RateBudget{2.5, 7}) {
		t.Fatalf("class rates: %v, client %v, api %v; want client off, api 2.5/7", err, c.ClientRate, c.APIRate)
	}
	// A raised GATEHOUSE_RATE_LIMIT, which used to bound every route, is
	// the least an unset class gets; the password budget follows it, smaller.
	c, err = load(t, map[string]string{"GATEHOUSE_RATE_LIMIT": "1500", "GATEHOUSE_RATE_BURST": "300", "GATEHOUSE_RATE_BURST_API": "5"})
	if err != nil || c.ClientRate != (RateBudget{1500, 400}) || c.APIRate != (RateBudget{1500, 5}) || c.AddressCapRate != (RateBudget{1500, 2000}) ||
		c.PasswordRate != (RateBudget{150, 60}) {
		t.Fatalf("raised shared limit: %v, %+v; want client 1500/400, api 1500/5, cap 1500/2000, password 150/60", err, c)
	}
	c, err = load(t, map[string]string{"GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1"})
	if err != nil || len(c.TrustedProxies) != 2 || c.TrustedProxies[1].String() != "192.0.2.1/32" {
		t.Fatalf("trusted proxies: %v, %v", err, c.TrustedProxies)
	}
}

func TestSettingsInvalid(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		vars map[string]string
		want []string
	}{
		"cidr":              {map[string]string{"GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, nonsense"}, []string{`GATEHOUSE_TRUSTED_PROXIES: invalid CIDR "nonsense"`}},
		"rate not a number": {map[string]string{"GATEHOUSE_RATE_LIMIT_CLIENT": "NaN", "GATEHOUSE_RATE_LIMIT_API": "Inf"}, []string{"GATEHOUSE_RATE_LIMIT_CLIENT: want a non-negative number", "GATEHOUSE_RATE_LIMIT_API: want a non-negative number"}},
		"class burst":       {map[string]string{"GATEHOUSE_RATE_BURST_ADDRESS_CAP": "0"}, []string{"GATEHOUSE_RATE_BURST_ADDRESS_CAP: want a positive integer"}},
		"fallback":          {map[string]string{"GATEHOUSE_RATE_LIMIT_FALLBACK": "closed"}, []string{`GATEHOUSE_RATE_LIMIT_FALLBACK: want memory or open, got "closed"`}},
	} {
		_, err := load(t, tc.vars)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want %q", name, err, w)
			}
		}
	}
}
