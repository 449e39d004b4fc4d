package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/apierror"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/microcache"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// Body limits when Options leave them zero.
const (
	DefaultMaxBodyBytes    = 1 << 20 // forms and JSON
	DefaultMaxRPCBodyBytes = 4 << 20 // gRPC's default max message size
)

// Options configure New.
type Options struct {
	// Logger receives the access log and edge's own warnings; nil means
	// slog.Default().
	Logger *slog.Logger
	// Services maps every service of the route table to its handler.
	Services map[routes.Service]http.Handler
	// Limiters charge each request to the budget of its route's
	// rate-limit class (routes.Class; a path not in the table is
	// ClassBrowser), keyed as the class says: by client address, by the
	// OAuth client the request names, or by its bearer token. A class
	// without a limiter is not limited; ClassMetadata must have none.
	Limiters map[routes.Class]ratelimit.Limiter
	// AddressCap, if set, also charges a ClassClient or ClassAPI request
	// that is keyed by a client or a token to its client address, once
	// the request's own budget allowed it: client ids and tokens are
	// unverified here, and one address must not multiply its budget by
	// naming new ones.
	AddressCap ratelimit.Limiter
	// BodyTimeout bounds how long a request's body may take to arrive
	// (DefaultBodyTimeout when 0): the server itself has no read timeout,
	// so gRPC and long responses work, and a client sending a body a byte
	// a minute would otherwise hold a connection, a goroutine and a
	// service connection for as long as it likes.
	BodyTimeout time.Duration
	// Password, if set, charges the POSTs of routes.PasswordPosts to their
	// client address too, once their class's budget allowed them.
	Password ratelimit.Limiter
	// Rejected, if set, is told of every request answered 429: its class,
	// and what the exhausted budget was keyed by ("address", "client",
	// "token", "address_cap" or "password").
	Rejected func(ctx context.Context, class routes.Class, key string)
	// MaxBodyBytes bounds request bodies of OAuth, browser and REST routes
	// (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxRPCBodyBytes bounds request bodies of gRPC/Connect routes
	// (default DefaultMaxRPCBodyBytes).
	MaxRPCBodyBytes int64
	// TrustedProxies lists CIDRs (or single addresses) of proxies in front
	// of edge whose X-Forwarded-* headers are believed. Empty trusts none:
	// the client address is the TCP peer.
	TrustedProxies []string
	// Issuer is the public base URL; Strict-Transport-Security is sent only
	// when it is https. Nil sends none.
	Issuer *url.URL
}

// DefaultBodyTimeout is Options.BodyTimeout's default: a 4 MiB body at
// 70 KB/s.
const DefaultBodyTimeout = time.Minute

type router struct {
	logger      *slog.Logger
	limiters    map[routes.Class]ratelimit.Limiter
	addressCap  ratelimit.Limiter
	password    ratelimit.Limiter
	bodyTimeout time.Duration
	rejected    func(ctx context.Context, class routes.Class, key string)
	trusted     trustedSet
	hsts        bool
	limiterWarn *rate.Sometimes
}

// New builds the handler. It fails when a service of the route table has no
// handler, a limit is negative, a limiter is given for ClassMetadata or an
// unknown class, or a trusted proxy does not parse.
func New(opts Options) (http.Handler, error) {
	rt := &router{
		logger:      opts.Logger,
		limiters:    map[routes.Class]ratelimit.Limiter{},
		addressCap:  opts.AddressCap,
		password:    opts.Password,
		bodyTimeout: cmp.Or(opts.BodyTimeout, DefaultBodyTimeout),
		rejected:    opts.Rejected,
		hsts:        opts.Issuer != nil && opts.Issuer.Scheme == "https",
		limiterWarn: &rate.Sometimes{Interval: 10 * time.Second},
	}
	if rt.logger == nil {
		rt.logger = slog.Default()
	}
	for class, l := range opts.Limiters {
		if class == routes.ClassMetadata || !slices.Contains(routes.Classes(), class) {
			return nil, fmt.Errorf("router: no limiter may be given for rate-limit class %q", class)
		}
		if l != nil {
			rt.limiters[class] = l
		}
	}
	var err error
	if rt.trusted, err = parseTrusted(opts.TrustedProxies); err != nil {
		return nil, err
	}
	maxBody, maxRPC := opts.MaxBodyBytes, opts.MaxRPCBodyBytes
	if maxBody < 0 || maxRPC < 0 {
		return nil, errors.New("router: body limits must not be negative")
	}
	if maxBody == 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if maxRPC == 0 {
		maxRPC = DefaultMaxRPCBodyBytes
	}

	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	// A path either is a route or is 404: no redirects that would turn
	// POST /oauth/v2/token/ into a GET elsewhere.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	// Client addresses are resolved by identify, not by gin.
	if err := e.SetTrustedProxies(nil); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	// Gin only routes: each route has one handler running edge's pipeline
	// (serve) as plain code, so per-request state lives in one struct
	// rather than in gin's context map and a chain of closures.
	for _, route := range routes.Table() {
		h := opts.Services[route.Service]
		if h == nil {
			return nil, fmt.Errorf("router: no handler for service %q (route %s)", route.Service, route.Pattern)
		}
		if route.Class == routes.ClassMetadata {
			h = microcache.New(h)
		}
		limit := maxBody
		if route.Kind == routes.RPC {
			limit = maxRPC
		}
		spec := &routeSpec{Route: route, cors: route.CORS(), handler: h, limit: limit}
		if err := register(e, route, []gin.HandlerFunc{func(c *gin.Context) { rt.serve(c, spec) }}); err != nil {
			return nil, err
		}
	}
	e.NoRoute(func(c *gin.Context) { rt.serve(c, nil) })
	return e, nil
}

// routeSpec is what serving one route needs.
type routeSpec struct {
	routes.Route
	cors    bool
	handler http.Handler
	limit   int64 // request body bytes
}

// register adds route to e, turning gin's panic on a conflict into an error.
func register(e *gin.Engine, route routes.Route, chain []gin.HandlerFunc) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("router: register %s: %v", route.Pattern, p)
		}
	}()
	pattern := route.Pattern
	if route.IsPrefix() {
		pattern = route.Prefix() + "*rest"
	}
	if route.Method == "" {
		e.Any(pattern, chain...)
		return nil
	}
	e.Handle(route.Method, pattern, chain...)
	if route.CORS() && route.Method != http.MethodOptions {
		e.OPTIONS(pattern, chain...) // preflight
	}
	return nil
}

func canonical(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	if p == "/" {
		return true
	}
	clean := path.Clean(p)
	return clean == p || (strings.HasSuffix(p, "/") && clean+"/" == p)
}

func answerNotFound(w http.ResponseWriter) {
	apierror.Write(w, http.StatusNotFound, apierror.NotFound, "")
}
