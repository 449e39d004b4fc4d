package config

import (
	"bytes"
	"encoding/base64"
	"errors"
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
	e, err := Get[*IdPEgress](c)
	if err != nil || !reflect.DeepEqual(e.Policy, netguard.Policy{}) {
		t.Fatalf("identity provider calls: %+v, %v by default; want public addresses only", e, err)
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
		c, err = Load(RoleEdge, env(tc.env), &IdPEgress{})
		if err != nil {
			t.Fatal(err)
		}
		if e, err := Get[*IdPEgress](c); err != nil || !reflect.DeepEqual(e.Policy, tc.want) {
			t.Fatalf("IdP egress with %v: %v %+v; want %+v", tc.env, err, e, tc.want)
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
		{"edge proxying needs token", RoleEdge, map[string]string{"GATEHOUSE_TOKENS_URL": "http://127.0.0.1:9"}, []string{"GATEHOUSE_INTERNAL_TOKEN: required"}},
		{"short token", RoleTokens, map[string]string{"GATEHOUSE_DIRECTORY_URL": "http://d", "GATEHOUSE_INTERNAL_TOKEN": "short"}, []string{"at least 32"}},
		{"authn needs urls", RoleAuthn, map[string]string{"GATEHOUSE_INTERNAL_TOKEN": token}, []string{"GATEHOUSE_DIRECTORY_URL: required for the authn process", "GATEHOUSE_TOKENS_URL: required"}},
		{"directory needs tokens", RoleDirectory, map[string]string{"GATEHOUSE_INTERNAL_TOKEN": token}, []string{"GATEHOUSE_TOKENS_URL: required for the directory process"}},
		{"service url scheme", RoleEdge, map[string]string{"GATEHOUSE_AUTHN_URL": "tcp://a", "GATEHOUSE_INTERNAL_TOKEN": token}, []string{"GATEHOUSE_AUTHN_URL"}},
		{"idp loopback flag", RoleEdge, map[string]string{"GATEHOUSE_IDP_ALLOW_LOOPBACK": "yes"}, []string{`GATEHOUSE_IDP_ALLOW_LOOPBACK: want true or false, got "yes"`}},
		{"idp deny private flag", RoleEdge, map[string]string{"GATEHOUSE_IDP_DENY_PRIVATE": "no"}, []string{`GATEHOUSE_IDP_DENY_PRIVATE: want true or false, got "no"`}},
		{"idp allow-list of loopback", RoleEdge, map[string]string{"GATEHOUSE_IDP_ALLOW": "10.0.0.0/8,127.0.0.1"}, []string{`GATEHOUSE_IDP_ALLOW: "127.0.0.1" is not within a private range`}},
		{"idp allow-list wildcard", RoleEdge, map[string]string{"GATEHOUSE_IDP_ALLOW": "*.corp.internal"}, []string{`GATEHOUSE_IDP_ALLOW: "*.corp.internal" is neither`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.role, env(tc.env), &IdPEgress{})
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

// sample is a section with one variable, which must be a positive integer.
type sample struct{ N int }

func (s *sample) Load(p *Parser, _ *Config) { s.N = p.Int("GATEHOUSE_SAMPLE", 1) }

type other struct{ D time.Duration }

func (o *other) Load(p *Parser, _ *Config) { o.D = p.Duration("GATEHOUSE_OTHER", time.Second) }

// A process reads the sections of its own services: another service's
// invalid variable does not stop it, its own does (at Load, or when the
// service asks with Get), and Check reports every problem of several
// sections in one line.
func TestSectionsOfTheServicesRun(t *testing.T) {
	bad := env(map[string]string{"GATEHOUSE_SAMPLE": "many", "GATEHOUSE_OTHER": "soon"})
	c, err := Load(RoleTokens, func(k string) string {
		return map[string]string{"GATEHOUSE_DIRECTORY_URL": "http://d", "GATEHOUSE_INTERNAL_TOKEN": token, "GATEHOUSE_SAMPLE": "many"}[k]
	}, &other{})
	if err != nil {
		t.Fatalf("another section's variable stopped the process: %v", err)
	}
	if _, err := Get[*sample](c); err == nil || !strings.Contains(err.Error(), `GATEHOUSE_SAMPLE: want a positive integer, got "many"`) {
		t.Fatalf("Get of an invalid section: %v", err)
	}
	if _, err := Load(RoleEdge, bad, &sample{}); err == nil || !strings.Contains(err.Error(), "GATEHOUSE_SAMPLE") {
		t.Fatalf("Load with an invalid section: %v", err)
	}
	c, err = Load(RoleEdge, bad)
	if err != nil {
		t.Fatal(err)
	}
	err = Check(c, &sample{}, &other{})
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Check: %v; want one line with both problems", err)
	}
	c, _ = Load(RoleEdge, env(map[string]string{"GATEHOUSE_SAMPLE": "7"}))
	if s, err := Get[*sample](c); err != nil || s.N != 7 {
		t.Fatalf("Get: %+v, %v", s, err)
	}
	if s, _ := Get[*sample](c); s.N != 7 {
		t.Fatal("a section read twice")
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
