package config

import (
	"bytes"
	"encoding/base64"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/netguard"
)

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

const token = "0123456789abcdef0123456789abcdef"

var key32 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

func TestDefaults(t *testing.T) {
	c, err := Load(RoleEdge, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":8080" || c.Issuer.String() != "http://localhost:8080" || c.DataDir != "./data" {
		t.Fatalf("defaults = %q %q %q", c.Addr, c.Issuer, c.DataDir)
	}
	if c.Distributed() || c.MasterKeyFile != filepath.Join("data", "master.key") {
		t.Fatalf("embedded edge: distributed=%v keyfile=%q", c.Distributed(), c.MasterKeyFile)
	}
	if !reflect.DeepEqual(c.IdPEgress, netguard.Policy{}) {
		t.Fatalf("identity provider calls: %+v by default; want public addresses only", c.IdPEgress)
	}
	if c.RateLimit != 50 || c.RateBurst != 100 || c.ClientRate != (RateBudget{200, 400}) || c.APIRate != (RateBudget{100, 200}) ||
		c.AddressCapRate != (RateBudget{1000, 2000}) {
		t.Fatalf("rate limits: browser %v/%d, client %v, api %v, address cap %v; want 50/100, 200/400, 100/200, 1000/2000",
			c.RateLimit, c.RateBurst, c.ClientRate, c.APIRate, c.AddressCapRate)
	}
	c, err = Load(RoleEdge, env(map[string]string{"GATEHOUSE_RATE_LIMIT_CLIENT": "0", "GATEHOUSE_RATE_LIMIT_API": "2.5", "GATEHOUSE_RATE_BURST_API": "7"}))
	if err != nil || c.ClientRate.PerSecond != 0 || c.APIRate != (RateBudget{2.5, 7}) {
		t.Fatalf("class rates: %v, client %v, api %v; want client off, api 2.5/7", err, c.ClientRate, c.APIRate)
	}
	// A raised GATEHOUSE_RATE_LIMIT, which used to bound every route, is
	// the least an unset class gets.
	c, err = Load(RoleEdge, env(map[string]string{"GATEHOUSE_RATE_LIMIT": "1500", "GATEHOUSE_RATE_BURST": "300", "GATEHOUSE_RATE_BURST_API": "5"}))
	if err != nil || c.ClientRate != (RateBudget{1500, 400}) || c.APIRate != (RateBudget{1500, 5}) || c.AddressCapRate != (RateBudget{1500, 2000}) {
		t.Fatalf("raised shared limit: %v, client %v, api %v, cap %v; want 1500/400, 1500/5, 1500/2000", err, c.ClientRate, c.APIRate, c.AddressCapRate)
	}
	// The password budget follows the browser budget, smaller.
	if c.PasswordRate != (RateBudget{150, 60}) {
		t.Fatalf("password budget with a raised browser budget: %v; want 150/60", c.PasswordRate)
	}
	if d, err := Load(RoleEdge, env(nil)); err != nil || d.PasswordRate != (RateBudget{5, 20}) {
		t.Fatalf("default password budget: %v %v; want 5/20", err, d.PasswordRate)
	}
	if c.Sessions.IdleLifetime != 2*time.Hour || c.Sessions.AbsoluteLifetime != 10*time.Hour {
		t.Fatalf("session lifetimes %+v; want 2h idle, 10h absolute", c.Sessions)
	}
	for _, tc := range []struct {
		env  map[string]string
		want netguard.Policy
	}{
		{map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true", "GATEHOUSE_IDP_DENY_PRIVATE": "1"}, netguard.Policy{AllowLoopback: true}},
		// The deprecated opt-out keeps the old default.
		{map[string]string{"GATEHOUSE_IDP_DENY_PRIVATE": "false"}, netguard.Policy{AllowPrivate: true}},
		{map[string]string{"GATEHOUSE_IDP_ALLOW": "10.0.0.0/8, idp.corp.internal"},
			netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, AllowHosts: []string{"idp.corp.internal"}}},
	} {
		c, err = Load(RoleEdge, env(tc.env))
		if err != nil || !reflect.DeepEqual(c.IdPEgress, tc.want) {
			t.Fatalf("IdP egress with %v: %v %+v; want %+v", tc.env, err, c.IdPEgress, tc.want)
		}
	}
}

func TestInvalid(t *testing.T) {
	cases := []struct {
		name string
		role Role
		env  map[string]string
		want []string // fragments of the one-line error
	}{
		{"malformed database url", RoleEdge, map[string]string{"GATEHOUSE_DATABASE_URL": "postgres://u:p@[::1", "GATEHOUSE_MASTER_KEY": key32}, []string{"GATEHOUSE_DATABASE_URL: malformed URL"}},
		{"pprof without a metrics listener", RoleEdge, map[string]string{"GATEHOUSE_PPROF": "true"}, []string{"GATEHOUSE_PPROF: needs GATEHOUSE_METRICS_ADDR"}},
		{"wrong database scheme", RoleEdge, map[string]string{"GATEHOUSE_DATABASE_URL": "mysql://h/db", "GATEHOUSE_MASTER_KEY": key32}, []string{"GATEHOUSE_DATABASE_URL", "mysql"}},
		{"database without name", RoleEdge, map[string]string{"GATEHOUSE_DATABASE_URL": "postgres://h", "GATEHOUSE_MASTER_KEY": key32}, []string{"must name a database"}},
		{"short master key", RoleEdge, map[string]string{"GATEHOUSE_MASTER_KEY": base64.StdEncoding.EncodeToString([]byte("short"))}, []string{"GATEHOUSE_MASTER_KEY: must decode to 32 bytes, got 5"}},
		{"master key not base64", RoleEdge, map[string]string{"GATEHOUSE_MASTER_KEY": "%%%"}, []string{"GATEHOUSE_MASTER_KEY: not valid base64"}},
		{"postgres needs master key", RoleEdge, map[string]string{"GATEHOUSE_DATABASE_URL": "postgres://h/db"}, []string{"GATEHOUSE_MASTER_KEY: required"}},
		{"issuer scheme", RoleEdge, map[string]string{"GATEHOUSE_ISSUER": "ftp://x"}, []string{"GATEHOUSE_ISSUER"}},
		{"issuer query", RoleEdge, map[string]string{"GATEHOUSE_ISSUER": "https://x/?a=b"}, []string{"GATEHOUSE_ISSUER: must not contain"}},
		{"bad port", RoleEdge, map[string]string{"GATEHOUSE_ADDR": ":http2"}, []string{"GATEHOUSE_ADDR"}},
		{"log level", RoleEdge, map[string]string{"GATEHOUSE_LOG_LEVEL": "loud"}, []string{"GATEHOUSE_LOG_LEVEL"}},
		{"redis scheme", RoleEdge, map[string]string{"GATEHOUSE_REDIS_URL": "http://x"}, []string{"GATEHOUSE_REDIS_URL"}},
		{"cidr", RoleEdge, map[string]string{"GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, nonsense"}, []string{`GATEHOUSE_TRUSTED_PROXIES: invalid CIDR "nonsense"`}},
		{"edge proxying needs token", RoleEdge, map[string]string{"GATEHOUSE_TOKENS_URL": "http://127.0.0.1:9"}, []string{"GATEHOUSE_INTERNAL_TOKEN: required"}},
		{"short token", RoleTokens, map[string]string{"GATEHOUSE_DIRECTORY_URL": "http://d", "GATEHOUSE_INTERNAL_TOKEN": "short"}, []string{"at least 32"}},
		{"authn needs urls", RoleAuthn, map[string]string{"GATEHOUSE_INTERNAL_TOKEN": token}, []string{"GATEHOUSE_DIRECTORY_URL: required for the authn process", "GATEHOUSE_TOKENS_URL: required"}},
		{"directory needs tokens", RoleDirectory, map[string]string{"GATEHOUSE_INTERNAL_TOKEN": token}, []string{"GATEHOUSE_TOKENS_URL: required for the directory process"}},
		{"signing algorithm", RoleEdge, map[string]string{"GATEHOUSE_SIGNING_ALGORITHM": "HS256"}, []string{"GATEHOUSE_SIGNING_ALGORITHM"}},
		{"signing library", RoleEdge, map[string]string{"GATEHOUSE_SIGNING_LIBRARY": "boringssl"}, []string{"GATEHOUSE_SIGNING_LIBRARY"}},
		{"rotation too often", RoleEdge, map[string]string{"GATEHOUSE_KEY_ROTATION_INTERVAL": "1m"}, []string{"GATEHOUSE_KEY_ROTATION_INTERVAL"}},
		{"refresh idle over absolute", RoleEdge, map[string]string{"GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME": "2000h", "GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME": "1000h"}, []string{"GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME"}},
		{"session idle over absolute", RoleEdge, map[string]string{"GATEHOUSE_SESSION_IDLE_LIFETIME": "11h"}, []string{"GATEHOUSE_SESSION_IDLE_LIFETIME: must not exceed GATEHOUSE_SESSION_ABSOLUTE_LIFETIME"}},
		{"session idle over shorter absolute", RoleEdge, map[string]string{"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "1h"}, []string{"GATEHOUSE_SESSION_IDLE_LIFETIME: must not exceed"}},
		{"session idle zero", RoleEdge, map[string]string{"GATEHOUSE_SESSION_IDLE_LIFETIME": "0s"}, []string{"GATEHOUSE_SESSION_IDLE_LIFETIME: want a positive duration"}},
		{"session absolute malformed", RoleEdge, map[string]string{"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "10 hours"}, []string{"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME: want a positive duration"}},
		{"negative grace", RoleEdge, map[string]string{"GATEHOUSE_REFRESH_REUSE_GRACE": "-1s"}, []string{"GATEHOUSE_REFRESH_REUSE_GRACE"}},
		{"service url scheme", RoleEdge, map[string]string{"GATEHOUSE_AUTHN_URL": "tcp://a", "GATEHOUSE_INTERNAL_TOKEN": token}, []string{"GATEHOUSE_AUTHN_URL"}},
		{"bootstrap key not PEM", RoleEdge, map[string]string{"GATEHOUSE_BOOTSTRAP_PUBLIC_KEY": "ssh-rsa AAAA"}, []string{"GATEHOUSE_BOOTSTRAP_PUBLIC_KEY: want a PEM public key"}},
		{"rate not a number", RoleEdge, map[string]string{"GATEHOUSE_RATE_LIMIT_CLIENT": "NaN", "GATEHOUSE_RATE_LIMIT_API": "Inf"}, []string{"GATEHOUSE_RATE_LIMIT_CLIENT: want a non-negative number", "GATEHOUSE_RATE_LIMIT_API: want a non-negative number"}},
		{"class burst", RoleEdge, map[string]string{"GATEHOUSE_RATE_BURST_ADDRESS_CAP": "0"}, []string{"GATEHOUSE_RATE_BURST_ADDRESS_CAP: want a positive integer"}},
		{"idp loopback flag", RoleEdge, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "yes"}, []string{`GATEHOUSE_IDP_ALLOW_LOOPBACK: want true or false, got "yes"`}},
		{"idp deny private flag", RoleEdge, map[string]string{"GATEHOUSE_IDP_DENY_PRIVATE": "no"}, []string{`GATEHOUSE_IDP_DENY_PRIVATE: want true or false, got "no"`}},
		{"idp allow-list of loopback", RoleEdge, map[string]string{"GATEHOUSE_IDP_ALLOW": "10.0.0.0/8,127.0.0.1"}, []string{`GATEHOUSE_IDP_ALLOW: "127.0.0.1" is not within a private range`}},
		{"idp allow-list wildcard", RoleEdge, map[string]string{"GATEHOUSE_IDP_ALLOW": "*.corp.internal"}, []string{`GATEHOUSE_IDP_ALLOW: "*.corp.internal" is neither`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.role, env(tc.env))
			if err == nil {
				t.Fatalf("Load succeeded; want error containing %q", tc.want)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q; want it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, ":p@") {
				t.Errorf("error leaks the database password: %q", msg)
			}
		})
	}
}

func TestSessionLifetimes(t *testing.T) {
	c, err := Load(RoleEdge, env(map[string]string{"GATEHOUSE_SESSION_IDLE_LIFETIME": "30m", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": "30m"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sessions.IdleLifetime != 30*time.Minute || c.Sessions.AbsoluteLifetime != 30*time.Minute {
		t.Errorf("got %+v; want 30m idle and absolute (equal is allowed)", c.Sessions)
	}
}

func TestEveryProblemReported(t *testing.T) {
	_, err := Load(RoleEdge, env(map[string]string{"GATEHOUSE_ISSUER": "nope", "GATEHOUSE_LOG_LEVEL": "x", "GATEHOUSE_MASTER_KEY": "abc"}))
	if err == nil {
		t.Fatal("want error")
	}
	for _, v := range []string{"GATEHOUSE_ISSUER", "GATEHOUSE_LOG_LEVEL", "GATEHOUSE_MASTER_KEY"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q misses %s", err, v)
		}
	}
}

func TestDistributedService(t *testing.T) {
	c, err := Load(RoleTokens, env(map[string]string{
		"GATEHOUSE_DIRECTORY_URL":  "http://127.0.0.1:8083/",
		"GATEHOUSE_INTERNAL_TOKEN": token,
		"GATEHOUSE_DATABASE_URL":   "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"GATEHOUSE_MASTER_KEY":     key32,
		"GATEHOUSE_ISSUER":         "https://id.example.com/",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.DirectoryURL.String() != "http://127.0.0.1:8083" || c.Issuer.String() != "https://id.example.com" || len(c.MasterKey) != 32 {
		t.Fatalf("got %v %v %d", c.DirectoryURL, c.Issuer, len(c.MasterKey))
	}
}

func TestMasterKeyFileCreatedOnceWith0600(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c, err := Load(RoleEdge, env(map[string]string{"GATEHOUSE_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	k1, err := c.LoadMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("master.key mode %v; want 0600", fi.Mode().Perm())
	}
	c2, _ := Load(RoleEdge, env(map[string]string{"GATEHOUSE_DATA_DIR": dir}))
	k2, err := c2.LoadMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) || len(k1) != 32 {
		t.Fatalf("second start read a different key")
	}
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	c3, _ := Load(RoleEdge, env(map[string]string{"GATEHOUSE_DATA_DIR": dir}))
	if _, err := c3.LoadMasterKey(); err == nil {
		t.Fatal("corrupt master key file accepted")
	}
}
