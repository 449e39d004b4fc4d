package config

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/apply"
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

	AdminPassword string // GATEHOUSE_ADMIN_PASSWORD; empty means generate on first start
	// BootstrapPublicKey is GATEHOUSE_BOOTSTRAP_PUBLIC_KEY: a PEM public
	// key registered for bootstrap-admin at first start instead of writing
	// a private key file (a cluster, where no file leaves a pod).
	BootstrapPublicKey string
	// BootstrapFile is GATEHOUSE_BOOTSTRAP_FILE, and BootstrapDocs its
	// documents (the gatehouse apply format, ${VAR} expanded from the
	// environment), applied once at first start as bootstrap-admin.
	BootstrapFile string
	BootstrapDocs []*apply.Doc
	LogLevel      slog.Level

	Tokens   Tokens
	Sessions Sessions

	TrustedProxies []netip.Prefix // GATEHOUSE_TRUSTED_PROXIES, comma-separated CIDRs
	// RateLimit and RateBurst are GATEHOUSE_RATE_LIMIT and
	// GATEHOUSE_RATE_BURST: requests per second and burst per client
	// address for the browser class at edge (pages, and paths not routed).
	// RateLimit 0 turns rate limiting off for every class.
	RateLimit float64
	RateBurst int
	// ClientRate is GATEHOUSE_RATE_LIMIT_CLIENT and _BURST_CLIENT: per
	// OAuth client at the token, introspection and revocation endpoints.
	ClientRate RateBudget
	// APIRate is GATEHOUSE_RATE_LIMIT_API and _BURST_API: per bearer
	// token at userinfo and the management and admin APIs.
	APIRate RateBudget
	// AddressCapRate is GATEHOUSE_RATE_LIMIT_ADDRESS_CAP and
	// _BURST_ADDRESS_CAP: per client address, over the requests of the
	// client and API classes that name a client or a token, which edge
	// cannot verify.
	AddressCapRate RateBudget
	// PasswordRate is GATEHOUSE_RATE_LIMIT_PASSWORD and _BURST_PASSWORD
	// (a tenth of RateLimit and a fifth of RateBurst unless set): per
	// client address, over the login pages' submissions that hash a
	// password (each costs one argon2id hash, of which a server runs only
	// a few at once), besides the browser budget.
	PasswordRate RateBudget
	// RateLimitFallback is GATEHOUSE_RATE_LIMIT_FALLBACK: what limits while
	// Redis is unreachable, "memory" (each replica in process) or "open".
	RateLimitFallback string
	ShutdownTimeout   time.Duration // GATEHOUSE_SHUTDOWN_TIMEOUT
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

	// IdPEgress says where calls to external identity providers may go
	// (pkg/netguard): authn dials through it and directory refuses an
	// issuer that names a refused address. Public addresses only, unless
	// GATEHOUSE_IDP_ALLOW_LOOPBACK (development and tests),
	// GATEHOUSE_IDP_ALLOW (private CIDRs and host names of on-premises
	// providers) or GATEHOUSE_IDP_DENY_PRIVATE=false (deprecated: every
	// private range) allow more.
	IdPEgress netguard.Policy
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
}

// RateBudget is one rate limit: requests per second on average and how
// many may pass at once. PerSecond 0 means no limit.
type RateBudget struct {
	PerSecond float64
	Burst     int
}

// Tokens configures the tokens service: signing and lifetimes.
type Tokens struct {
	SigningAlgorithm    string        // GATEHOUSE_SIGNING_ALGORITHM: RS256 (default), ES256 or EdDSA
	SigningLibrary      string        // GATEHOUSE_SIGNING_LIBRARY: auto (default: OpenSSL when it loads), openssl or go
	KeyRotationInterval time.Duration // GATEHOUSE_KEY_ROTATION_INTERVAL, default 6h
	AccessTokenLifetime time.Duration // GATEHOUSE_ACCESS_TOKEN_LIFETIME, default 12h
	IDTokenLifetime     time.Duration // GATEHOUSE_ID_TOKEN_LIFETIME, default 12h
	RefreshIdleLifetime time.Duration // GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME, default 720h (30 days)
	RefreshAbsLifetime  time.Duration // GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME, default 2160h (90 days)
	AuthCodeLifetime    time.Duration // GATEHOUSE_AUTH_CODE_LIFETIME, default 60s
	RefreshReuseGrace   time.Duration // GATEHOUSE_REFRESH_REUSE_GRACE, default 10s (0: none)
}

// Sessions configures authn's browser (SSO) sessions. A session answers
// authorization requests without a login only while both lifetimes hold:
// IdleLifetime since its last activity (its sign-in, or an authorization
// request it answered) and AbsoluteLifetime since its user last
// authenticated.
//
// The idle default is longer than Keycloak's 30 minutes on purpose:
// Keycloak also counts every refresh token request as activity, and its
// access tokens live 5 minutes, so an active user touches the session all
// the time. Here only authorization requests reach the session (refresh
// tokens are offline_access tokens of the tokens service, and access
// tokens live 12h), so with 30 minutes a user who opens a second
// application an hour after the first would have to sign in again. Two
// hours keeps single sign-on across a working day's pauses; the absolute
// 10 hours (Keycloak's) still ends every session within a day. Password
// sign-in is NIST SP 800-63B AAL1, which sets no inactivity limit and
// 30 days overall; AAL2 deployments set the idle lifetime to 30m.
type Sessions struct {
	IdleLifetime     time.Duration // GATEHOUSE_SESSION_IDLE_LIFETIME, default 2h
	AbsoluteLifetime time.Duration // GATEHOUSE_SESSION_ABSOLUTE_LIFETIME, default 10h
	// Retention (GATEHOUSE_SESSION_RETENTION, default 24h): how long an
	// ended or expired session, and a browser without one, is kept.
	Retention time.Duration
}

// Getenv looks up one variable; os.Getenv satisfies it.
type Getenv func(string) string

// Load reads and validates the configuration for role. The returned error,
// if any, is one line listing every invalid variable.
func Load(role Role, getenv Getenv) (*Config, error) {
	p := &parser{getenv: getenv}
	c := &Config{Role: role}

	c.Addr = p.str("GATEHOUSE_ADDR", ":8080")
	if _, port, ok := strings.Cut(c.Addr, ":"); !ok || port == "" {
		p.fail("GATEHOUSE_ADDR", "want host:port or :port, got %q", c.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.fail("GATEHOUSE_ADDR", "invalid port %q", port)
	}
	c.Issuer = p.issuer("GATEHOUSE_ISSUER", "http://localhost:8080")
	c.DataDir = p.str("GATEHOUSE_DATA_DIR", "./data")
	c.DatabaseURL = p.databaseURL("GATEHOUSE_DATABASE_URL")
	c.RedisURL = p.redisURL("GATEHOUSE_REDIS_URL")
	c.InternalToken = p.str("GATEHOUSE_INTERNAL_TOKEN", "")
	c.AuthnURL = p.serviceURL("GATEHOUSE_AUTHN_URL")
	c.TokensURL = p.serviceURL("GATEHOUSE_TOKENS_URL")
	c.DirectoryURL = p.serviceURL("GATEHOUSE_DIRECTORY_URL")
	c.AdminPassword = p.str("GATEHOUSE_ADMIN_PASSWORD", "")
	c.BootstrapPublicKey = p.str("GATEHOUSE_BOOTSTRAP_PUBLIC_KEY", "")
	if k := c.BootstrapPublicKey; k != "" {
		if b, _ := pem.Decode([]byte(k)); b == nil || b.Type != "PUBLIC KEY" {
			p.fail("GATEHOUSE_BOOTSTRAP_PUBLIC_KEY", "want a PEM public key (-----BEGIN PUBLIC KEY-----)")
		}
	}
	if c.BootstrapFile = p.str("GATEHOUSE_BOOTSTRAP_FILE", ""); c.BootstrapFile != "" {
		docs, err := apply.ParsePath(c.BootstrapFile, func(k string) (string, bool) {
			v := getenv(k)
			return v, v != ""
		})
		if err != nil {
			p.fail("GATEHOUSE_BOOTSTRAP_FILE", "%v", err)
		}
		c.BootstrapDocs = docs
	}
	c.LogLevel = p.logLevel("GATEHOUSE_LOG_LEVEL")
	c.TrustedProxies = p.prefixes("GATEHOUSE_TRUSTED_PROXIES")
	c.RateLimit = p.float("GATEHOUSE_RATE_LIMIT", 50)
	c.RateBurst = p.int("GATEHOUSE_RATE_BURST", 100)
	// A class left unset never gets less than GATEHOUSE_RATE_LIMIT and
	// _BURST, which bounded every route before classes existed: an
	// instance that raised them for a busy backend keeps that budget.
	shared := RateBudget{c.RateLimit, c.RateBurst}
	c.ClientRate = p.rateBudget("CLIENT", RateBudget{200, 400}, shared)
	c.APIRate = p.rateBudget("API", RateBudget{100, 200}, shared)
	c.AddressCapRate = p.rateBudget("ADDRESS_CAP", RateBudget{1000, 2000}, shared)
	// A tenth of the browser budget's rate and a fifth of its burst (5/s
	// and 20 by default), not floored by it: it is meant to be smaller.
	c.PasswordRate = p.rateBudget("PASSWORD", RateBudget{c.RateLimit / 10, max(c.RateBurst/5, 1)}, RateBudget{})
	switch c.RateLimitFallback = p.str("GATEHOUSE_RATE_LIMIT_FALLBACK", "memory"); c.RateLimitFallback {
	case "memory", "open":
	default:
		p.fail("GATEHOUSE_RATE_LIMIT_FALLBACK", "want memory or open, got %q", c.RateLimitFallback)
	}
	c.ShutdownTimeout = p.duration("GATEHOUSE_SHUTDOWN_TIMEOUT", 20*time.Second)
	c.MetricsAddr = p.str("GATEHOUSE_METRICS_ADDR", "")
	if a := c.MetricsAddr; a != "" {
		if _, port, ok := strings.Cut(a, ":"); !ok || port == "" {
			p.fail("GATEHOUSE_METRICS_ADDR", "want host:port or :port, got %q", a)
		}
	}
	if c.Pprof = p.bool("GATEHOUSE_PPROF"); c.Pprof && c.MetricsAddr == "" {
		p.fail("GATEHOUSE_PPROF", "needs GATEHOUSE_METRICS_ADDR: the profiler is served only on that separate listener")
	}
	c.DrainDelay = 5 * time.Second
	if p.str("GATEHOUSE_DRAIN_DELAY", "") != "" {
		c.DrainDelay = p.durationOrZero("GATEHOUSE_DRAIN_DELAY")
	}
	c.CacheMaxStale = p.duration("GATEHOUSE_CACHE_MAX_STALE", 15*time.Minute)
	c.PruneInterval = p.duration("GATEHOUSE_PRUNE_INTERVAL", 10*time.Minute)
	c.DBMaxConns = p.int("GATEHOUSE_DB_MAX_CONNS", 20)
	c.IdPEgress = p.idpEgress()
	c.Tokens = Tokens{
		SigningAlgorithm:    p.str("GATEHOUSE_SIGNING_ALGORITHM", "RS256"),
		SigningLibrary:      p.str("GATEHOUSE_SIGNING_LIBRARY", "auto"),
		KeyRotationInterval: p.duration("GATEHOUSE_KEY_ROTATION_INTERVAL", 6*time.Hour),
		AccessTokenLifetime: p.duration("GATEHOUSE_ACCESS_TOKEN_LIFETIME", 12*time.Hour),
		IDTokenLifetime:     p.duration("GATEHOUSE_ID_TOKEN_LIFETIME", 12*time.Hour),
		RefreshIdleLifetime: p.duration("GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME", 30*24*time.Hour),
		RefreshAbsLifetime:  p.duration("GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME", 90*24*time.Hour),
		AuthCodeLifetime:    p.duration("GATEHOUSE_AUTH_CODE_LIFETIME", 60*time.Second),
		RefreshReuseGrace:   10 * time.Second,
	}
	if p.str("GATEHOUSE_REFRESH_REUSE_GRACE", "") != "" {
		c.Tokens.RefreshReuseGrace = p.durationOrZero("GATEHOUSE_REFRESH_REUSE_GRACE")
	}
	switch c.Tokens.SigningAlgorithm {
	case "RS256", "ES256", "EdDSA":
	default:
		p.fail("GATEHOUSE_SIGNING_ALGORITHM", "want RS256, ES256 or EdDSA, got %q", c.Tokens.SigningAlgorithm)
	}
	switch c.Tokens.SigningLibrary {
	case "auto", "openssl", "go":
	default:
		p.fail("GATEHOUSE_SIGNING_LIBRARY", "want auto, openssl or go, got %q", c.Tokens.SigningLibrary)
	}
	if c.Tokens.RefreshIdleLifetime > c.Tokens.RefreshAbsLifetime {
		p.fail("GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME", "must not exceed GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME")
	}
	c.Sessions = Sessions{
		IdleLifetime:     p.duration("GATEHOUSE_SESSION_IDLE_LIFETIME", 2*time.Hour),
		AbsoluteLifetime: p.duration("GATEHOUSE_SESSION_ABSOLUTE_LIFETIME", 10*time.Hour),
		Retention:        p.duration("GATEHOUSE_SESSION_RETENTION", 24*time.Hour),
	}
	if c.Sessions.IdleLifetime > c.Sessions.AbsoluteLifetime {
		p.fail("GATEHOUSE_SESSION_IDLE_LIFETIME", "must not exceed GATEHOUSE_SESSION_ABSOLUTE_LIFETIME")
	}
	if c.Tokens.KeyRotationInterval < 10*time.Minute {
		p.fail("GATEHOUSE_KEY_ROTATION_INTERVAL", "must be at least 10m (keys are published minutes before they sign)")
	}

	if key := p.str("GATEHOUSE_MASTER_KEY", ""); key != "" {
		b, err := base64.StdEncoding.DecodeString(key)
		switch {
		case err != nil:
			p.fail("GATEHOUSE_MASTER_KEY", "not valid base64")
		case len(b) != MasterKeySize:
			p.fail("GATEHOUSE_MASTER_KEY", "must decode to %d bytes, got %d", MasterKeySize, len(b))
		default:
			c.MasterKey = b
		}
	} else if c.DatabaseURL != "" {
		p.fail("GATEHOUSE_MASTER_KEY", "required when GATEHOUSE_DATABASE_URL is set (every replica must share it)")
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
		p.fail("role", "unknown process role %q", role)
	}
	if c.Distributed() {
		switch {
		case c.InternalToken == "":
			p.fail("GATEHOUSE_INTERNAL_TOKEN", "required when services run as separate processes")
		case len(c.InternalToken) < MinInternalTokenLength:
			p.fail("GATEHOUSE_INTERNAL_TOKEN", "must be at least %d characters", MinInternalTokenLength)
		}
	}
	if len(p.problems) > 0 {
		return nil, fmt.Errorf("invalid configuration: %s", strings.Join(p.problems, "; "))
	}
	return c, nil
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

type parser struct {
	getenv   Getenv
	problems []string
}

func (p *parser) fail(name, format string, args ...any) {
	p.problems = append(p.problems, name+": "+fmt.Sprintf(format, args...))
}

func (p *parser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

// idpEgress reads the policy of calls to identity providers. Private
// ranges were allowed before GATEHOUSE_IDP_ALLOW existed, unless
// GATEHOUSE_IDP_DENY_PRIVATE=true; now they are refused unless listed, and
// an explicit GATEHOUSE_IDP_DENY_PRIVATE=false keeps the old default.
func (p *parser) idpEgress() netguard.Policy {
	pol := netguard.Policy{AllowLoopback: p.bool("GATEHOUSE_IDP_ALLOW_LOOPBACK")}
	if p.str("GATEHOUSE_IDP_DENY_PRIVATE", "") != "" {
		pol.AllowPrivate = !p.bool("GATEHOUSE_IDP_DENY_PRIVATE")
	}
	var err error
	if pol.Allow, pol.AllowHosts, err = netguard.ParseAllow(p.getenv("GATEHOUSE_IDP_ALLOW")); err != nil {
		p.fail("GATEHOUSE_IDP_ALLOW", "%v", err)
	}
	return pol
}

// bool reads true or false (default false).
func (p *parser) bool(name string) bool {
	switch v := strings.ToLower(strings.TrimSpace(p.getenv(name))); v {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	default:
		p.fail(name, "want true or false, got %q", v)
		return false
	}
}

func (p *parser) require(name string, u *url.URL, role Role) {
	if u == nil {
		p.fail(name, "required for the %s process", role)
	}
}

func (p *parser) issuer(name, def string) *url.URL {
	raw := strings.TrimRight(p.str(name, def), "/")
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.fail(name, "not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		p.fail(name, "must be an http or https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		p.fail(name, "must include a host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		p.fail(name, "must not contain user info, a query or a fragment")
	default:
		return u
	}
	return nil
}

func (p *parser) serviceURL(name string) *url.URL {
	raw := p.str(name, "")
	if raw == "" {
		return nil
	}
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	switch {
	case err != nil:
		p.fail(name, "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		p.fail(name, "must be an http or https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		p.fail(name, "must include a host")
	default:
		return u
	}
	return nil
}

func (p *parser) databaseURL(name string) string {
	raw := p.str(name, "")
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		// url.Parse errors quote the input, which may hold a password.
		p.fail(name, "malformed URL")
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		p.fail(name, "must be a postgres:// URL (leave it unset for SQLite), got scheme %q", u.Scheme)
	case u.Host == "":
		p.fail(name, "must include a host")
	case strings.Trim(u.Path, "/") == "":
		p.fail(name, "must name a database")
	default:
		return raw
	}
	return ""
}

func (p *parser) redisURL(name string) string {
	raw := p.str(name, "")
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.fail(name, "malformed URL")
	case u.Scheme != "redis" && u.Scheme != "rediss":
		p.fail(name, "must be a redis:// or rediss:// URL, got scheme %q", u.Scheme)
	case u.Host == "":
		p.fail(name, "must include a host")
	default:
		return raw
	}
	return ""
}

func (p *parser) logLevel(name string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(p.str(name, "info"))); err != nil {
		p.fail(name, "want debug, info, warn or error")
	}
	return l
}

func (p *parser) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.Split(p.str(name, ""), ",") {
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
			p.fail(name, "invalid CIDR %q", s)
			continue
		}
		out = append(out, pf.Masked())
	}
	return out
}

func (p *parser) float(name string, def float64) float64 {
	raw := p.str(name, "")
	if raw == "" {
		return def
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		p.fail(name, "want a non-negative number, got %q", raw)
	}
	return f
}

// rateBudget reads GATEHOUSE_RATE_LIMIT_<class> and
// GATEHOUSE_RATE_BURST_<class>; each one unset is the larger of def's and
// floor's.
func (p *parser) rateBudget(class string, def, floor RateBudget) RateBudget {
	return RateBudget{
		PerSecond: p.float("GATEHOUSE_RATE_LIMIT_"+class, max(def.PerSecond, floor.PerSecond)),
		Burst:     p.int("GATEHOUSE_RATE_BURST_"+class, max(def.Burst, floor.Burst)),
	}
}

func (p *parser) int(name string, def int) int {
	raw := p.str(name, "")
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		p.fail(name, "want a positive integer, got %q", raw)
	}
	return n
}

func (p *parser) durationOrZero(name string) time.Duration {
	raw := p.str(name, "")
	if raw == "" {
		return 0
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 {
		p.fail(name, "want a non-negative duration such as 10s, got %q", raw)
	}
	return d
}

func (p *parser) duration(name string, def time.Duration) time.Duration {
	raw := p.str(name, "")
	if raw == "" {
		return def
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		p.fail(name, "want a positive duration such as 30s, got %q", raw)
	}
	return d
}
