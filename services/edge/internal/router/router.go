package router

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/apierror"
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
	// Limiter limits requests per client address; nil disables limiting.
	Limiter ratelimit.Limiter
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

// Keys in the gin context.
const (
	keyHeaders = "edge.headers" // *headerWriter
	keyService = "edge.service" // routes.Service
)

type router struct {
	logger      *slog.Logger
	limiter     ratelimit.Limiter
	trusted     trustedSet
	hsts        bool
	limiterWarn *rate.Sometimes
}

// New builds the handler. It fails when a service of the route table has no
// handler, a limit is negative or a trusted proxy does not parse.
func New(opts Options) (http.Handler, error) {
	rt := &router{
		logger:      opts.Logger,
		limiter:     opts.Limiter,
		hsts:        opts.Issuer != nil && opts.Issuer.Scheme == "https",
		limiterWarn: &rate.Sometimes{Interval: 10 * time.Second},
	}
	if rt.logger == nil {
		rt.logger = slog.Default()
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
	e.Use(rt.recovery, rt.identify, rt.accessLog, rt.securityHeaders)

	for _, route := range routes.Table() {
		h := opts.Services[route.Service]
		if h == nil {
			return nil, fmt.Errorf("router: no handler for service %q (route %s)", route.Service, route.Pattern)
		}
		limit := maxBody
		if route.Kind == routes.RPC {
			limit = maxRPC
		}
		chain := []gin.HandlerFunc{routeInfo(route)}
		if route.CORS() {
			chain = append(chain, cors)
		}
		if rt.limiter != nil {
			chain = append(chain, rt.rateLimit)
		}
		chain = append(chain, bodyLimit(limit), dispatch(h))
		if err := register(e, route, chain); err != nil {
			return nil, err
		}
	}
	var notFound []gin.HandlerFunc
	if rt.limiter != nil {
		notFound = append(notFound, rt.rateLimit)
	}
	e.NoRoute(append(notFound, answerNotFound)...)
	return e, nil
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

// routeInfo records the matched service for the access log and refuses
// non-canonical paths: "/management/v1/../gatehouse.directory.v1.…" matches
// a prefix here but could name an internal service behind it.
func routeInfo(route routes.Route) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !canonical(c.Request.URL.Path) {
			answerNotFound(c)
			c.Abort()
			return
		}
		c.Set(keyService, route.Service)
		c.Next()
	}
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

func dispatch(h http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) { h.ServeHTTP(c.Writer, c.Request) }
}

func answerNotFound(c *gin.Context) {
	apierror.Write(c.Writer, http.StatusNotFound, apierror.NotFound, "")
}
