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
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
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
	// Embedded services call each other in-process. Directory and tokens
	// need each other, so directory gets a reference bound once tokens exists.
	tokensRef := &lateTokens{}
	var dirRef directoryv1connect.DirectoryServiceHandler // set before tokens is built
	var tokensHandler tokensv1connect.TokenServiceHandler // set before authn is built
	var deps directorysvc.Deps
	if cfg.TokensURL == nil {
		deps.Tokens = tokensRef
	}
	constructors := []struct {
		svc routes.Service
		new func() (embedded, error)
	}{
		{routes.Directory, func() (embedded, error) {
			d, err := directorysvc.New(ctx, env, deps)
			if err == nil {
				dirRef = d.DirectoryService()
			}
			return d, err
		}},
		{routes.Tokens, func() (embedded, error) {
			var tdeps tokenssvc.Deps
			if cfg.DirectoryURL == nil {
				tdeps.Directory = dirRef
			}
			t, err := tokenssvc.New(ctx, env, tdeps)
			if err == nil {
				tokensHandler = t.TokenService()
				tokensRef.bind(tokensHandler)
			}
			return t, err
		}},
		{routes.Authn, func() (embedded, error) {
			var adeps authnsvc.Deps
			if cfg.DirectoryURL == nil {
				adeps.Directory = dirRef
			}
			if cfg.TokensURL == nil {
				adeps.Tokens = tokensHandler // built before authn
			}
			return authnsvc.New(ctx, env, adeps)
		}},
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

	limiter, err := newLimiter(cfg.RedisURL, cfg.RateLimit, cfg.RateBurst, cfg.RateLimitFallback, env)
	if err != nil {
		return e, err
	}
	e.rateLimiter = func() string {
		switch l := limiter.(type) {
		case nil:
			return "off"
		case redisLimiter:
			if l.Degraded() {
				return "fallback: " + cfg.RateLimitFallback + " (Redis unreachable)"
			}
			return "redis"
		}
		return "memory"
	}
	if c, ok := limiter.(interface{ Close() error }); ok {
		e.closers = append(e.closers, c.Close)
	}
	trusted := make([]string, 0, len(cfg.TrustedProxies))
	for _, p := range cfg.TrustedProxies {
		trusted = append(trusted, p.String())
	}
	h, err := router.New(router.Options{
		Logger:         log,
		Services:       handlers,
		Limiter:        limiter,
		TrustedProxies: trusted,
		Issuer:         cfg.Issuer,
	})
	if err != nil {
		return e, err
	}
	e.handler = stripInternalCredential(h)
	return e, nil
}

// lateTokens forwards to the embedded tokens service once it is built.
type lateTokens struct {
	h atomic.Pointer[tokensv1connect.TokenServiceHandler]
}

func (l *lateTokens) bind(h tokensv1connect.TokenServiceHandler) { l.h.Store(&h) }

var errTokensNotStarted = connect.NewError(connect.CodeUnavailable, errors.New("tokens service not started"))

func (l *lateTokens) Introspect(ctx context.Context, req *connect.Request[tokensv1.IntrospectRequest]) (*connect.Response[tokensv1.IntrospectResponse], error) {
	h := l.h.Load()
	if h == nil {
		return nil, errTokensNotStarted
	}
	return (*h).Introspect(ctx, req)
}

func (l *lateTokens) RevokeUserTokens(ctx context.Context, req *connect.Request[tokensv1.RevokeUserTokensRequest]) (*connect.Response[tokensv1.RevokeUserTokensResponse], error) {
	h := l.h.Load()
	if h == nil {
		return nil, errTokensNotStarted
	}
	return (*h).RevokeUserTokens(ctx, req)
}

// redisLimiter owns its client.
type redisLimiter struct {
	*ratelimit.Redis
	client *redis.Client
}

func (r redisLimiter) Close() error { return r.client.Close() }

func newLimiter(redisURL string, perSecond float64, burst int, fallback string, env process.Env) (ratelimit.Limiter, error) {
	if perSecond == 0 {
		return nil, nil
	}
	if redisURL == "" {
		return ratelimit.NewMemory(perSecond, burst)
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("GATEHOUSE_REDIS_URL: %w", err)
	}
	client := redis.NewClient(opts)
	rps := int(perSecond)
	if rps < 1 {
		rps = 1
	}
	l, err := ratelimit.NewRedis(client, "gatehouse:ratelimit:", rps, burst, env.Logger)
	if err != nil {
		return nil, errors.Join(err, client.Close())
	}
	if fallback == "memory" {
		if l.Fallback, err = ratelimit.NewMemory(perSecond, burst); err != nil {
			return nil, errors.Join(err, client.Close())
		}
	}
	if err := telemetry.Flag("gatehouse.edge.ratelimit.fallback",
		"1 while Redis is unreachable and the rate limiter's fallback (GATEHOUSE_RATE_LIMIT_FALLBACK) decides.", l.Degraded); err != nil {
		return nil, errors.Join(err, client.Close())
	}
	return redisLimiter{Redis: l, client: client}, nil
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
