package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/netguard"
)

// Role names the process being configured.
type Role string

// The four Gatehouse processes.
const (
	RoleEdge      Role = "edge"
	RoleAuthn     Role = "authn"
	RoleTokens    Role = "tokens"
	RoleDirectory Role = "directory"
)

// MasterKeySize is the length of the master key in bytes (AES-256).
const MasterKeySize = 32

// MinInternalTokenLength is the shortest accepted internal-call credential.
const MinInternalTokenLength = 32

// Config is the validated configuration of one process.
type Config struct {
	Role Role

	Addr    string   // GATEHOUSE_ADDR, listen address
	Issuer  *url.URL // GATEHOUSE_ISSUER, the public base URL, no trailing slash
	DataDir string   // GATEHOUSE_DATA_DIR

	DatabaseURL string // GATEHOUSE_DATABASE_URL; empty means SQLite files in DataDir
	RedisURL    string // GATEHOUSE_REDIS_URL; empty means in-process state

	// MasterKey is GATEHOUSE_MASTER_KEY decoded. When it is nil the key is
	// read from, or generated into, MasterKeyFile (embedded/SQLite only).
	MasterKey     []byte
	MasterKeyFile string

	InternalToken string // GATEHOUSE_INTERNAL_TOKEN

	// Service URLs. Nil means the service is embedded in this process
	// (edge) or not needed by it.
	AuthnURL     *url.URL
	TokensURL    *url.URL
	DirectoryURL *url.URL

	LogLevel slog.Level // GATEHOUSE_LOG_LEVEL

	ShutdownTimeout time.Duration // GATEHOUSE_SHUTDOWN_TIMEOUT
	// MetricsAddr is GATEHOUSE_METRICS_ADDR: where /metrics is served, on
	// its own listener. Unset: the internal services serve it on their
	// (never public) address, and edge, the public one, not at all.
	MetricsAddr string
	// Pprof is GATEHOUSE_PPROF: serve Go's profiler (/debug/pprof/) beside
	// /metrics on GATEHOUSE_METRICS_ADDR, which it requires. Off by
	// default: a profile costs CPU and shows the code's internals.
	Pprof bool
	// DrainDelay is GATEHOUSE_DRAIN_DELAY: after SIGTERM the process keeps
	// serving this long with /readyz 503, so load balancers stop sending
	// before it stops listening.
	DrainDelay time.Duration

	// CacheMaxStale (GATEHOUSE_CACHE_MAX_STALE, default 15m) bounds how long
	// what one service cached of another keeps serving through that
	// service's outage: tokens' clients and machine keys, directory's
	// checked management tokens.
	CacheMaxStale time.Duration
	// PruneInterval (GATEHOUSE_PRUNE_INTERVAL, default 10m) paces the
	// deletion of expired rows (README, "Data retention").
	PruneInterval time.Duration
	// DBMaxConns (GATEHOUSE_DB_MAX_CONNS, default 20) is the size of each
	// service's PostgreSQL pool per process; every connection is kept
	// (none is closed while busy), so size PostgreSQL's max_connections
	// for replicas × services × this.
	DBMaxConns int
	// RequirePAR (GATEHOUSE_REQUIRE_PAR, default false): every
	// authorization request must be pushed first (RFC 9126): authn refuses
	// plain ones, discovery says require_pushed_authorization_requests.
	RequirePAR bool
	// DPoPRequireNonce (GATEHOUSE_DPOP_REQUIRE_NONCE, default false): a
	// DPoP proof must carry a server nonce (RFC 9449 §8), which the token
	// and userinfo endpoints hand out in DPoP-Nonce; it limits a proof
	// made ahead of time to the nonce's five to ten minutes.
	DPoPRequireNonce bool

	getenv   Getenv
	sections sync.Map // reflect.Type → Section, loaded
}

// Getenv looks up one variable; os.Getenv satisfies it.
type Getenv func(string) string

// Load reads and validates the configuration for role. The returned error,
// if any, is one line listing every invalid variable.
//
// The common core is read here; each service reads its own section
// (Section) of the same environment: those given here are read now, with
// their problems in the same line, and any other when the service asks
// for it (Get). So a process reads only the variables of the services it
// runs, and another service's variable never stops it.
func Load(role Role, getenv Getenv, sections ...Section) (*Config, error) {
	p := &Parser{getenv: getenv}
	c := &Config{Role: role, getenv: getenv}

	c.Addr = p.Str("GATEHOUSE_ADDR", ":8080")
	if _, port, ok := strings.Cut(c.Addr, ":"); !ok || port == "" {
		p.Fail("GATEHOUSE_ADDR", "want host:port or :port, got %q", c.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.Fail("GATEHOUSE_ADDR", "invalid port %q", port)
	}
	c.Issuer = p.issuer("GATEHOUSE_ISSUER", "http://localhost:8080")
	c.DataDir = p.Str("GATEHOUSE_DATA_DIR", "./data")
	c.DatabaseURL = p.databaseURL("GATEHOUSE_DATABASE_URL")
	c.RedisURL = p.redisURL("GATEHOUSE_REDIS_URL")
	c.InternalToken = p.Str("GATEHOUSE_INTERNAL_TOKEN", "")
	c.AuthnURL = p.serviceURL("GATEHOUSE_AUTHN_URL")
	c.TokensURL = p.serviceURL("GATEHOUSE_TOKENS_URL")
	c.DirectoryURL = p.serviceURL("GATEHOUSE_DIRECTORY_URL")
	c.LogLevel = p.logLevel("GATEHOUSE_LOG_LEVEL")
	c.ShutdownTimeout = p.Duration("GATEHOUSE_SHUTDOWN_TIMEOUT", 20*time.Second)
	c.MetricsAddr = p.Str("GATEHOUSE_METRICS_ADDR", "")
	if a := c.MetricsAddr; a != "" {
		if _, port, ok := strings.Cut(a, ":"); !ok || port == "" {
			p.Fail("GATEHOUSE_METRICS_ADDR", "want host:port or :port, got %q", a)
		}
	}
	if c.Pprof = p.Bool("GATEHOUSE_PPROF"); c.Pprof && c.MetricsAddr == "" {
		p.Fail("GATEHOUSE_PPROF", "needs GATEHOUSE_METRICS_ADDR: the profiler is served only on that separate listener")
	}
	c.DrainDelay = 5 * time.Second
	if p.Str("GATEHOUSE_DRAIN_DELAY", "") != "" {
		c.DrainDelay = p.DurationOrZero("GATEHOUSE_DRAIN_DELAY")
	}
	c.CacheMaxStale = p.Duration("GATEHOUSE_CACHE_MAX_STALE", 15*time.Minute)
	c.PruneInterval = p.Duration("GATEHOUSE_PRUNE_INTERVAL", 10*time.Minute)
	c.DBMaxConns = p.Int("GATEHOUSE_DB_MAX_CONNS", 20)
	c.RequirePAR = p.Bool("GATEHOUSE_REQUIRE_PAR")
	c.DPoPRequireNonce = p.Bool("GATEHOUSE_DPOP_REQUIRE_NONCE")
	if key := p.Str("GATEHOUSE_MASTER_KEY", ""); key != "" {
		b, err := base64.StdEncoding.DecodeString(key)
		switch {
		case err != nil:
			p.Fail("GATEHOUSE_MASTER_KEY", "not valid base64")
		case len(b) != MasterKeySize:
			p.Fail("GATEHOUSE_MASTER_KEY", "must decode to %d bytes, got %d", MasterKeySize, len(b))
		default:
			c.MasterKey = b
		}
	} else if c.DatabaseURL != "" {
		p.Fail("GATEHOUSE_MASTER_KEY", "required when GATEHOUSE_DATABASE_URL is set (every replica must share it)")
	} else {
		c.MasterKeyFile = filepath.Join(c.DataDir, "master.key")
	}

	switch role {
	case RoleEdge:
	case RoleAuthn:
		p.require("GATEHOUSE_DIRECTORY_URL", c.DirectoryURL, role)
		p.require("GATEHOUSE_TOKENS_URL", c.TokensURL, role)
	case RoleTokens:
		p.require("GATEHOUSE_DIRECTORY_URL", c.DirectoryURL, role)
	case RoleDirectory:
		p.require("GATEHOUSE_TOKENS_URL", c.TokensURL, role)
	default:
		p.Fail("role", "unknown process role %q", role)
	}
	if c.Distributed() {
		switch {
		case c.InternalToken == "":
			p.Fail("GATEHOUSE_INTERNAL_TOKEN", "required when services run as separate processes")
		case len(c.InternalToken) < MinInternalTokenLength:
			p.Fail("GATEHOUSE_INTERNAL_TOKEN", "must be at least %d characters", MinInternalTokenLength)
		}
	}
	Sections(func(*Config) []Section { return sections }).Load(p, c)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Section is one service's part of the configuration, a pointer to its
// settings: Load reads them from p, reporting problems with p.Fail.
type Section interface {
	Load(p *Parser, core *Config)
}

// Sections is a Section made of the sections a process runs, chosen once
// the core is read (the embedded edge runs every service whose URL is
// unset).
type Sections func(core *Config) []Section

// Load reads each section not read yet.
func (f Sections) Load(p *Parser, core *Config) {
	for _, sec := range f(core) {
		if _, ok := core.sections.Load(reflect.TypeOf(sec)); !ok {
			sec.Load(p, core)
			core.sections.Store(reflect.TypeOf(sec), sec)
		}
	}
}

// Get returns c's section of type T (a pointer type), reading it from the
// environment the first time when Load was not given it. The error, a
// *Error, lists every invalid variable of the section.
func Get[T Section](c *Config) (T, error) {
	typ := reflect.TypeFor[T]()
	if v, ok := c.sections.Load(typ); ok {
		return v.(T), nil
	}
	sec := reflect.New(typ.Elem()).Interface().(T)
	p := &Parser{getenv: c.getenv}
	if p.getenv == nil {
		p.getenv = func(string) string { return "" }
	}
	sec.Load(p, c)
	if err := p.Err(); err != nil {
		var zero T
		return zero, err
	}
	v, _ := c.sections.LoadOrStore(typ, sec)
	return v.(T), nil
}

// Error is an invalid configuration: every problem found, one per
// variable.
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return "invalid configuration: " + strings.Join(e.Problems, "; ") }

// Check reads every section given, for a process that runs several
// services (the embedded edge), and returns one *Error listing every
// problem of all of them.
func Check(c *Config, sections ...Section) error {
	p := &Parser{getenv: c.getenv}
	Sections(func(*Config) []Section { return sections }).Load(p, c)
	return p.Err()
}

// Distributed reports whether this process talks to, or is, a separately
// running service, so internal calls cross the network.
func (c *Config) Distributed() bool {
	return c.Role != RoleEdge || c.AuthnURL != nil || c.TokensURL != nil || c.DirectoryURL != nil
}

// LoadMasterKey returns the configured master key, or reads it from
// MasterKeyFile, creating that file (0600) with a random key on first start.
func (c *Config) LoadMasterKey() ([]byte, error) {
	if c.MasterKey != nil {
		return c.MasterKey, nil
	}
	b, err := os.ReadFile(c.MasterKeyFile)
	if err == nil {
		key, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(key) != MasterKeySize {
			return nil, fmt.Errorf("master key file %s: not base64 of %d bytes", c.MasterKeyFile, MasterKeySize)
		}
		c.MasterKey = key
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read master key file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(c.MasterKeyFile), 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	key := make([]byte, MasterKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate master key: %w", err)
	}
	// O_EXCL: two processes starting at once must not write different keys.
	f, err := os.OpenFile(c.MasterKeyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return c.LoadMasterKey()
	}
	if err != nil {
		return nil, fmt.Errorf("create master key file: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("write master key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write master key file: %w", err)
	}
	c.MasterKey = key
	return key, nil
}

// Parser reads variables, collecting every problem.
type Parser struct {
	getenv   Getenv
	problems []string
}

// Err returns the problems found, as an *Error, or nil.
func (p *Parser) Err() error {
	if len(p.problems) == 0 {
		return nil
	}
	return &Error{Problems: p.problems}
}

// Getenv returns a variable as set (for sections that expand ${VAR}).
func (p *Parser) Getenv(name string) string { return p.getenv(name) }

// Fail records a problem with name.
func (p *Parser) Fail(name, format string, args ...any) {
	p.problems = append(p.problems, name+": "+fmt.Sprintf(format, args...))
}

// Str reads a string (def when unset or blank).
func (p *Parser) Str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

// IdPEgress is the section of the services that call external identity
// providers (authn) or check their addresses (directory), and of tokens,
// whose back-channel logouts call URIs that app owners register: where
// those calls may go (pkg/netguard). Public addresses only, unless
// GATEHOUSE_IDP_ALLOW_LOOPBACK (development and tests), GATEHOUSE_IDP_ALLOW
// (private CIDRs and host names of on-premises providers) or
// GATEHOUSE_IDP_DENY_PRIVATE=false (deprecated: every private range) allow
// more.
type IdPEgress struct {
	netguard.Policy
}

// Load reads the policy. Private ranges were allowed before
// GATEHOUSE_IDP_ALLOW existed, unless GATEHOUSE_IDP_DENY_PRIVATE=true; now
// they are refused unless listed, and an explicit
// GATEHOUSE_IDP_DENY_PRIVATE=false keeps the old default.
func (e *IdPEgress) Load(p *Parser, _ *Config) {
	pol := netguard.Policy{AllowLoopback: p.Bool("GATEHOUSE_IDP_ALLOW_LOOPBACK")}
	if p.Str("GATEHOUSE_IDP_DENY_PRIVATE", "") != "" {
		pol.AllowPrivate = !p.Bool("GATEHOUSE_IDP_DENY_PRIVATE")
	}
	var err error
	if pol.Allow, pol.AllowHosts, err = netguard.ParseAllow(p.getenv("GATEHOUSE_IDP_ALLOW")); err != nil {
		p.Fail("GATEHOUSE_IDP_ALLOW", "%v", err)
	}
	e.Policy = pol
}

// Bool reads true or false (default false).
func (p *Parser) Bool(name string) bool {
	switch v := strings.ToLower(strings.TrimSpace(p.getenv(name))); v {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	default:
		p.Fail(name, "want true or false, got %q", v)
		return false
	}
}

func (p *Parser) require(name string, u *url.URL, role Role) {
	if u == nil {
		p.Fail(name, "required for the %s process", role)
	}
}

func (p *Parser) issuer(name, def string) *url.URL {
	raw := strings.TrimRight(p.Str(name, def), "/")
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.Fail(name, "not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		p.Fail(name, "must be an http or https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		p.Fail(name, "must include a host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		p.Fail(name, "must not contain user info, a query or a fragment")
	default:
		return u
	}
	return nil
}

func (p *Parser) serviceURL(name string) *url.URL {
	raw := p.Str(name, "")
	if raw == "" {
		return nil
	}
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	switch {
	case err != nil:
		p.Fail(name, "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		p.Fail(name, "must be an http or https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		p.Fail(name, "must include a host")
	default:
		return u
	}
	return nil
}

func (p *Parser) databaseURL(name string) string {
	raw := p.Str(name, "")
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		// url.Parse errors quote the input, which may hold a password.
		p.Fail(name, "malformed URL")
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		p.Fail(name, "must be a postgres:// URL (leave it unset for SQLite), got scheme %q", u.Scheme)
	case u.Host == "":
		p.Fail(name, "must include a host")
	case strings.Trim(u.Path, "/") == "":
		p.Fail(name, "must name a database")
	default:
		return raw
	}
	return ""
}

func (p *Parser) redisURL(name string) string {
	raw := p.Str(name, "")
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.Fail(name, "malformed URL")
	case u.Scheme != "redis" && u.Scheme != "rediss":
		p.Fail(name, "must be a redis:// or rediss:// URL, got scheme %q", u.Scheme)
	case u.Host == "":
		p.Fail(name, "must include a host")
	default:
		return raw
	}
	return ""
}

func (p *Parser) logLevel(name string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(p.Str(name, "info"))); err != nil {
		p.Fail(name, "want debug, info, warn or error")
	}
	return l
}

// Prefixes reads comma-separated CIDRs (an address alone is its /32 or
// /128).
func (p *Parser) Prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.Split(p.Str(name, ""), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
		}
		pf, err := netip.ParsePrefix(s)
		if err != nil {
			p.Fail(name, "invalid CIDR %q", s)
			continue
		}
		out = append(out, pf.Masked())
	}
	return out
}

// Float reads a non-negative number.
func (p *Parser) Float(name string, def float64) float64 {
	raw := p.Str(name, "")
	if raw == "" {
		return def
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		p.Fail(name, "want a non-negative number, got %q", raw)
	}
	return f
}

// Int reads a positive integer.
func (p *Parser) Int(name string, def int) int {
	raw := p.Str(name, "")
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		p.Fail(name, "want a positive integer, got %q", raw)
	}
	return n
}

// DurationOrZero reads a non-negative duration (0 when unset).
func (p *Parser) DurationOrZero(name string) time.Duration {
	raw := p.Str(name, "")
	if raw == "" {
		return 0
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		p.Fail(name, "want a non-negative duration such as 10s, got %q", raw)
	}
	return d
}

// Duration reads a positive duration.
func (p *Parser) Duration(name string, def time.Duration) time.Duration {
	raw := p.Str(name, "")
	if raw == "" {
		return def
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		p.Fail(name, "want a positive duration such as 30s, got %q", raw)
	}
	return d
}
