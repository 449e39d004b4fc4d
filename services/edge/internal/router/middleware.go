package router

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/apierror"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// recovery turns a panic into 500 {"error":"server_error"}, or aborts the
// connection when the response had already started, so a truncated response
// never looks complete. http.ErrAbortHandler (the proxy's way to abort a
// broken stream) is passed on to net/http, which closes quietly.
func (rt *router) recovery(c *gin.Context) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			panic(p)
		}
		rt.logger.ErrorContext(c.Request.Context(), "panic serving request",
			"panic", fmt.Sprint(p), "method", c.Request.Method, "path", c.Request.URL.Path,
			"request_id", reqinfo.RequestID(c.Request.Context()), "stack", string(debug.Stack()))
		if c.Writer.Written() {
			panic(http.ErrAbortHandler)
		}
		apierror.Write(c.Writer, http.StatusInternalServerError, apierror.ServerError, "")
		c.Abort()
	}()
	c.Next()
}

// accessLog writes one line per request. It logs the path only: query
// strings carry authorization codes and tokens.
func (rt *router) accessLog(c *gin.Context) {
	start := time.Now()
	// Captured now: an in-process handler (vanguard) may rewrite the path.
	path := c.Request.URL.Path
	completed := false
	defer func() {
		status := c.Writer.Status()
		attrs := make([]slog.Attr, 0, 10)
		if !completed { // panicking; recovery answers 500 unless already written
			attrs = append(attrs, slog.Bool("panic", true))
			if !c.Writer.Written() {
				status = http.StatusInternalServerError
			}
		}
		svc, _ := c.Get(keyService)
		svcName, _ := svc.(routes.Service)
		info := reqinfo.FromContext(c.Request.Context())
		attrs = append(attrs,
			slog.String("method", c.Request.Method),
			slog.String("path", path),
			slog.Int("status", status),
			slog.Int("bytes", max(c.Writer.Size(), 0)),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("client", info.ClientAddr),
			slog.String("request_id", info.RequestID),
			slog.String("service", string(svcName)),
			slog.String("proto", c.Request.Proto),
		)
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		rt.logger.LogAttrs(c.Request.Context(), level, "request", attrs...)
	}()
	c.Next()
	completed = true
}

// securityHeaders sets edge's policy headers; a service may send its own
// Content-Security-Policy and Strict-Transport-Security.
func (rt *router) securityHeaders(c *gin.Context) {
	hw := headersOf(c)
	hw.set.Set("X-Content-Type-Options", "nosniff")
	hw.set.Set("Referrer-Policy", "no-referrer")
	hw.set.Set("X-Frame-Options", "DENY")
	hw.defaults.Set("Content-Security-Policy", "frame-ancestors 'none'")
	if rt.hsts {
		hw.defaults.Set("Strict-Transport-Security", "max-age=31536000")
	}
	c.Next()
}

// CORS for the OIDC endpoints browsers call from JavaScript (discovery,
// keys, token, userinfo, introspect, revoke). They authenticate with tokens
// or client credentials, never cookies, so any origin may call them and
// credentials are not allowed. Authorization must be listed by name: the "*"
// wildcard does not cover it.
const (
	corsAllowMethods  = "GET, POST, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Accept, Accept-Language, Cache-Control, DPoP, X-Requested-With, X-Request-Id"
	corsExposeHeaders = "WWW-Authenticate, Retry-After, X-Request-Id, DPoP-Nonce, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset"
	corsMaxAge        = "7200" // Chromium's cap
)

func cors(c *gin.Context) {
	r := c.Request
	if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		h := c.Writer.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		c.Writer.WriteHeader(http.StatusNoContent)
		c.Writer.WriteHeaderNow()
		c.Abort()
		return
	}
	// Sent with or without Origin, so a cached response serves both.
	hw := headersOf(c)
	hw.defaults.Set("Access-Control-Allow-Origin", "*")
	hw.defaults.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	c.Next()
}

// rateLimit charges the client address. A limiter error fails open: the
// limiter protects capacity and must not take the service down with it.
func (rt *router) rateLimit(c *gin.Context) {
	ctx := c.Request.Context()
	client := reqinfo.FromContext(ctx).ClientAddr
	d, err := rt.limiter.Allow(ctx, rateKey(client))
	if err != nil {
		rt.limiterWarn.Do(func() {
			rt.logger.WarnContext(ctx, "rate limiter failed; allowing requests", "error", err.Error())
		})
		c.Next()
		return
	}
	if d.Limit > 0 {
		hw := headersOf(c)
		reset := strconv.Itoa(ceilSeconds(d.ResetAfter, 0))
		for _, prefix := range []string{"RateLimit-", "X-RateLimit-"} {
			hw.set.Set(prefix+"Limit", strconv.Itoa(d.Limit))
			hw.set.Set(prefix+"Remaining", strconv.Itoa(d.Remaining))
			hw.set.Set(prefix+"Reset", reset)
		}
	}
	if !d.Allowed {
		secs := ceilSeconds(d.RetryAfter, 1)
		c.Writer.Header().Set("Retry-After", strconv.Itoa(secs))
		apierror.Write(c.Writer, http.StatusTooManyRequests, apierror.RateLimited,
			fmt.Sprintf("too many requests; retry after %d seconds", secs))
		c.Abort()
		return
	}
	c.Next()
}

func ceilSeconds(d time.Duration, minimum int) int {
	return max(int(math.Ceil(d.Seconds())), minimum)
}
