// Package service assembles edge: for each of authn, tokens and directory it
// either mounts the service in-process (its URL variable unset — the
// embedded mode) or reverse-proxies to it over h2c, then puts the router
// (request ids, access log, security headers, CORS, rate and body limits)
// in front.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	authnsvc "github.com/gatehouse-id/gatehouse/services/authn/service"
	directorysvc "github.com/gatehouse-id/gatehouse/services/directory/service"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/proxy"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/router"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
	tokenssvc "github.com/gatehouse-id/gatehouse/services/tokens/service"
)

// embedded is a service mounted in this process.
type embedded interface {
	PublicHandler() http.Handler
	Checks() map[string]server.Check
	Close() error
}

// Edge is the edge process's component.
type Edge struct {
	handler http.Handler
	checks  map[string]server.Check
	closers []func() error
	// rateLimiter describes the limiter for /readyz's details.
	rateLimiter func() string
}

// Details implements process.Detailer: how requests are rate limited now.
func (e *Edge) Details() map[string]any {
	if e.rateLimiter == nil {
		return nil
	}
	return map[string]any{"rateLimiter": e.rateLimiter()}
}

var _ process.Component = (*Edge)(nil)

// Build is edge's process.Build.
func Build(ctx context.Context, env process.Env) (process.Component, error) {
	e, err := New(ctx, env)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// New wires edge from env.Config.
func New(ctx context.Context, env process.Env) (e *Edge, err error) {
	cfg, log := env.Config, env.Logger
	settings, err := config.Get[*Settings](cfg)
	if err != nil {
		return nil, err
	}
	// Every section of the services run here, checked before any starts
	// (process.Main reads them with the core already).
	if err := config.Check(cfg, Sections); err != nil {
		return nil, err
	}
	e = &Edge{checks: map[string]server.Check{}}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()

	remote := map[routes.Service]*url.URL{
		routes.Authn:     cfg.AuthnURL,
		routes.Tokens:    cfg.TokensURL,
		routes.Directory: cfg.DirectoryURL,
	}
	// Embedded services call each other through in-memory clients of their
	// internal APIs: the same clients, handlers and interceptors (internal
	// credential, deadlines, tracing) as across the network. Directory and
	// tokens need each other, so each client reaches a handler bound once
	// its service is built (rpc.LateHandler; nothing calls before).
	if cfg.InternalToken == "" {
		// Embedded only (a distributed configuration requires one): the
		// in-memory calls carry a credential like any other.
		cfg.InternalToken = secrets.RandomToken(32)
	}
	copts, err := rpc.InternalClientOptions(cfg.InternalToken)
	if err != nil {
		return e, err
	}
	dirLate, tokensLate := &rpc.LateHandler{}, &rpc.LateHandler{}
	dirClient := directoryv1connect.NewDirectoryServiceClient(rpc.NewInMemoryClient(dirLate), "http://directory.internal", copts...)
	tokensClient := tokensv1connect.NewTokenServiceClient(rpc.NewInMemoryClient(tokensLate), "http://tokens.internal", copts...)
	var ddeps directorysvc.Deps
	var tdeps tokenssvc.Deps
	var adeps authnsvc.Deps
	if cfg.TokensURL == nil {
		ddeps.Tokens, adeps.Tokens = tokensClient, tokensClient
	}
	if cfg.DirectoryURL == nil {
		tdeps.Directory, adeps.Directory = dirClient, dirClient
	}
	constructors := []struct {
		svc routes.Service
		new func() (embedded, error)
	}{
		{routes.Directory, func() (embedded, error) {
			d, err := directorysvc.New(ctx, env, ddeps)
			if err == nil {
				dirLate.Bind(d.Handler())
			}
			return d, err
		}},
		{routes.Tokens, func() (embedded, error) {
			t, err := tokenssvc.New(ctx, env, tdeps)
			if err == nil {
				tokensLate.Bind(t.Handler())
			}
			return t, err
		}},
		{routes.Authn, func() (embedded, error) { return authnsvc.New(ctx, env, adeps) }},
	}
	handlers := map[routes.Service]http.Handler{}
	for _, c := range constructors {
		if u := remote[c.svc]; u != nil {
			p, err := proxy.New(u, string(c.svc), log, proxy.WithInternalToken(cfg.InternalToken))
			if err != nil {
				return e, fmt.Errorf("proxy to %s: %w", c.svc, err)
			}
			handlers[c.svc] = p
			e.closers = append(e.closers, func() error { p.CloseIdleConnections(); return nil })
			log.Info("routing to remote service", "service", c.svc, "url", u.Redacted())
			continue
		}
		s, err := c.new()
		if err != nil {
			return e, fmt.Errorf("embedded %s: %w", c.svc, err)
		}
		handlers[c.svc] = s.PublicHandler()
		e.closers = append(e.closers, s.Close)
		for name, check := range s.Checks() {
			e.checks[name] = check
		}
	}

	limits, err := newLimiters(cfg, settings, env)
	if err != nil {
		return e, err
	}
	e.closers = append(e.closers, limits.Close)
	e.rateLimiter = func() string {
		switch {
		case len(limits.byClass) == 0:
			return "off"
		case limits.client == nil:
			return "memory"
		case limits.degraded():
			return "fallback: " + settings.RateLimitFallback + " (Redis unreachable)"
		}
		return "redis"
	}
	rejected, err := telemetry.NewCounter("gatehouse.edge.ratelimit.rejected",
		"Requests edge answered 429, by rate-limit class and by what the exhausted budget is keyed by (address, client, token, address_cap, password).",
		"class", "key")
	if err != nil {
		return e, err
	}
	trusted := make([]string, 0, len(settings.TrustedProxies))
	for _, p := range settings.TrustedProxies {
		trusted = append(trusted, p.String())
	}
	h, err := router.New(router.Options{
		Logger:         log,
		Services:       handlers,
		Limiters:       limits.byClass,
		AddressCap:     limits.addressCap,
		Password:       limits.password,
		Rejected:       func(ctx context.Context, c routes.Class, key string) { rejected.Inc(ctx, string(c), key) },
		TrustedProxies: trusted,
		Issuer:         cfg.Issuer,
	})
	if err != nil {
		return e, err
	}
	e.handler = stripInternalCredential(h)
	return e, nil
}

// limiters are edge's rate limiters: one per limited class, the address
// cap and the password submissions', all in process or all on one Redis
// client.
type limiters struct {
	byClass    map[routes.Class]ratelimit.Limiter
	addressCap ratelimit.Limiter
	password   ratelimit.Limiter
	client     *redis.Client
	// redis is the first Redis limiter; the others are its WithLimit
	// siblings, sharing its view of Redis's health.
	redis *ratelimit.Redis
}

// degraded reports whether the limiters decide without Redis now.
func (l *limiters) degraded() bool { return l.redis != nil && l.redis.Degraded() }

// Close closes the Redis client, if any.
func (l *limiters) Close() error {
	if l.client == nil {
		return nil
	}
	return l.client.Close()
}

// newLimiters builds the limiters of cfg's budgets: the browser class
// (GATEHOUSE_RATE_LIMIT, 0 turns every class off), the client and API
// classes and the address cap (each off at a rate of 0). ClassMetadata is
// never limited.
func newLimiters(cfg *config.Config, s *Settings, env process.Env) (l *limiters, err error) {
	l = &limiters{byClass: map[routes.Class]ratelimit.Limiter{}}
	if s.RateLimit == 0 {
		return l, nil
	}
	if cfg.RedisURL != "" {
		opts, err := ratelimit.ClientOptions(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("GATEHOUSE_REDIS_URL: %w", err)
		}
		l.client = redis.NewClient(opts)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	budgets := []struct {
		class  routes.Class // "" for the address cap, "password" for password submissions
		budget RateBudget
	}{
		{routes.ClassBrowser, RateBudget{PerSecond: s.RateLimit, Burst: s.RateBurst}},
		{routes.ClassClient, s.ClientRate},
		{routes.ClassAPI, s.APIRate},
		{"", s.AddressCapRate},
		{"password", s.PasswordRate},
	}
	for _, b := range budgets {
		if b.budget.PerSecond == 0 {
			continue
		}
		lim, err := l.newLimiter(b.budget, s.RateLimitFallback, env)
		if err != nil {
			return nil, err
		}
		switch b.class {
		case "":
			l.addressCap = lim
		case "password":
			l.password = lim
		default:
			l.byClass[b.class] = lim
		}
	}
	if l.client != nil {
		if err := telemetry.Flag("gatehouse.edge.ratelimit.fallback",
			"1 while Redis is unreachable and the rate limiter's fallback (GATEHOUSE_RATE_LIMIT_FALLBACK) decides.", l.degraded); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// newLimiter is one budget's limiter: in process, or in Redis (whose GCRA
// counts whole requests per second) with the configured fallback; the Redis
// limiters share one view of Redis's health, so an outage costs one slow
// request per second, not one per budget. Keys of different classes differ
// (router.rateKey), so they share Redis's prefix.
func (l *limiters) newLimiter(b RateBudget, fallback string, env process.Env) (ratelimit.Limiter, error) {
	if l.client == nil {
		return ratelimit.NewMemory(b.PerSecond, b.Burst)
	}
	rps := max(int(b.PerSecond), 1)
	var r *ratelimit.Redis
	var err error
	if l.redis == nil {
		r, err = ratelimit.NewRedis(l.client, "gatehouse:ratelimit:", rps, b.Burst, env.Logger)
		l.redis = r
	} else {
		r, err = l.redis.WithLimit(rps, b.Burst)
	}
	if err != nil {
		return nil, err
	}
	if fallback == "memory" {
		if r.Fallback, err = ratelimit.NewMemory(b.PerSecond, b.Burst); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// stripInternalCredential drops the internal-call header from public
// requests: only services may present it, never a client through edge.
func stripInternalCredential(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(rpc.InternalTokenHeader)
		h.ServeHTTP(w, r)
	})
}

// Handler implements process.Component.
func (e *Edge) Handler() http.Handler { return e.handler }

// Checks implements process.Component: the embedded services' dependencies.
// Remote services are not checked — one being down must not take edge (and
// every other route) out of rotation.
func (e *Edge) Checks() map[string]server.Check { return e.checks }

// Close releases embedded services and connections.
func (e *Edge) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}
