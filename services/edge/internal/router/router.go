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

	"github.com/gatehouse-id/gatehouse/services/edge/internal/microcache"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
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
	// specs are the table's routes by the pattern gin matched
	// (gin.Context.FullPath).
	specs       map[string]*routeSpec
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
		specs:       map[string]*routeSpec{},
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
	// The pipeline, in order. Every request: identify (request id,
	// client address; the request's state), the access log, gin's
	// recovery, edge's response headers.
	e.Use(rt.identify, rt.accessLog, rt.recovery(), rt.securityHeaders)
	// A table route: which one (404 for a non-canonical path), CORS, the
	// body's deadline, then, in its class's group, the class's rate
	// limit, and its own body limit and service.
	table := e.Group("/", rt.route, rt.cors, rt.bodyDeadline)
	classes := map[routes.Class]*gin.RouterGroup{}
	for _, class := range routes.Classes() {
		g := table.Group("")
		if lim := rt.limiters[class]; lim != nil {
			g.Use(rt.limit(class, lim))
		}
		classes[class] = g
	}
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
		if err := register(classes[route.Class], route, []gin.HandlerFunc{bodyLimit(limit), gin.WrapH(h)}); err != nil {
			return nil, err
		}
		rt.specs[ginPattern(route)] = &routeSpec{Route: route, cors: route.CORS(), errors: errorsOf(route.Kind)}
	}
	// Any other path: the browser class's rate limit, then 404.
	unmatched := []gin.HandlerFunc{rt.unmatched}
	if lim := rt.limiters[routes.ClassBrowser]; lim != nil {
		unmatched = append(unmatched, rt.limit(routes.ClassBrowser, lim))
	}
	e.NoRoute(append(unmatched, notFound)...)
	return e, nil
}

// routeSpec is what the pipeline needs to know of a table route.
type routeSpec struct {
	routes.Route
	cors   bool
	errors reqinfo.ErrorForm
}

// errorsOf is the form of edge's own errors on a route of kind k.
func errorsOf(k routes.Kind) reqinfo.ErrorForm {
	switch k {
	case routes.Browser:
		return reqinfo.ErrorsPage
	case routes.RPC:
		return reqinfo.ErrorsRPC
	}
	return reqinfo.ErrorsJSON
}

// ginPattern is route's pattern in gin's syntax.
func ginPattern(route routes.Route) string {
	if route.IsPrefix() {
		return route.Prefix() + "*rest"
	}
	return route.Pattern
}

// register adds route to e, turning gin's panic on a conflict into an error.
func register(e gin.IRoutes, route routes.Route, chain []gin.HandlerFunc) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("router: register %s: %v", route.Pattern, p)
		}
	}()
	pattern := ginPattern(route)
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
