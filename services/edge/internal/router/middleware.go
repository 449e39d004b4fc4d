package router

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/apierror"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// request is edge's state for one request, allocated once.
type request struct {
	start   time.Time
	path    string // captured first: an in-process handler (vanguard) may rewrite it
	info    reqinfo.Info
	service routes.Service // empty until the path is known canonical
	hw      headerWriter
	limited limitWriter
	body    limitedBody
}

// serve is edge's pipeline for one request, in order: identify the request
// (id, client address, forwarding headers), recover panics and log the
// request (deferred), refuse non-canonical paths, answer CORS preflights,
// charge the rate limit, bound the body, and hand the request to the
// route's service. spec is nil for a path no route matches.
func (rt *router) serve(c *gin.Context, spec *routeSpec) {
	st := &request{start: time.Now(), path: c.Request.URL.Path}
	rt.identify(c, st)
	defer rt.finish(c, st)
	if spec == nil {
		telemetry.SetRoute(c.Request.Context(), "unmatched")
		if rt.rateLimit(c, st, routes.ClassBrowser) {
			answerNotFound(c.Writer)
		}
		return
	}
	telemetry.SetRoute(c.Request.Context(), spec.Pattern)
	st.info.Page = spec.Kind == routes.Browser
	// "/management/v1/../gatehouse.directory.v1.…" matches a prefix here
	// but could name an internal service behind it.
	if !canonical(st.path) {
		answerNotFound(c.Writer)
		return
	}
	st.service = spec.Service
	if spec.cors {
		if preflight(c.Writer, c.Request) {
			return
		}
		st.hw.cors = true
	}
	if r := c.Request; r.Body != nil && r.Body != http.NoBody {
		// The body must arrive in time, from the first byte the rate
		// limiter may read of it (see Options.BodyTimeout).
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(rt.bodyTimeout))
	}
	if !rt.rateLimit(c, st, spec.Class) {
		return
	}
	if !st.limitBody(c, spec.limit) {
		return
	}
	spec.handler.ServeHTTP(c.Writer, c.Request)
	st.endBody()
}

// finish recovers a panic and writes the access log line. A panic becomes
// 500 {"error":"server_error"}, or aborts the connection when the response
// had already started, so a truncated response never looks complete.
// http.ErrAbortHandler (the proxy's way to abort a broken stream) is passed
// on to net/http, which closes quietly.
func (rt *router) finish(c *gin.Context, st *request) {
	p := recover()
	if p == nil {
		// Nothing written: gin sends the header after the handler,
		// bypassing the headerWriter.
		st.hw.apply()
		rt.accessLog(c, st, false)
		return
	}
	if p != http.ErrAbortHandler {
		rt.logger.ErrorContext(c.Request.Context(), "panic serving request",
			"panic", fmt.Sprint(p), "method", c.Request.Method, "path", st.path,
			"request_id", st.info.RequestID, "stack", string(debug.Stack()))
	}
	if p == http.ErrAbortHandler || c.Writer.Written() {
		rt.accessLog(c, st, true)
		panic(http.ErrAbortHandler)
	}
	apierror.Respond(c.Writer, c.Request, http.StatusInternalServerError, apierror.ServerError, "")
	c.Abort()
	rt.accessLog(c, st, true)
}

// accessLog writes one line per request. It logs the path only: query
// strings carry authorization codes and tokens.
func (rt *router) accessLog(c *gin.Context, st *request, panicked bool) {
	status := c.Writer.Status()
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	attrs := [...]slog.Attr{
		slog.Bool("panic", true),
		slog.String("method", c.Request.Method),
		slog.String("path", st.path),
		slog.Int("status", status),
		slog.Int("bytes", max(c.Writer.Size(), 0)),
		slog.Float64("duration_ms", float64(time.Since(st.start).Microseconds())/1000),
		slog.String("client", st.info.ClientAddr),
		slog.String("request_id", st.info.RequestID),
		slog.String("service", string(st.service)),
		slog.String("proto", c.Request.Proto),
	}
	list := attrs[1:]
	if panicked {
		list = attrs[:]
	}
	rt.logger.LogAttrs(c.Request.Context(), level, "request", list...)
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

// preflight answers a CORS preflight request and reports whether it did.
// Other requests get Access-Control-Allow-Origin from the headerWriter,
// with or without Origin, so a cached response serves both.
func preflight(w gin.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodOptions || r.Header.Get("Origin") == "" || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	w.WriteHeaderNow()
	return true
}

// rateLimit charges the request to its class's budget (see rateKey; and
// to the address cap) and reports whether it may go on; when not, it has
// answered 429. A limiter error fails open: the limiter protects capacity
// and must not take the service down with it.
func (rt *router) rateLimit(c *gin.Context, st *request, class routes.Class) bool {
	lim := rt.limiters[class]
	if lim == nil {
		return true
	}
	ctx := c.Request.Context()
	key, by := rateKey(c.Request, class, st.info.ClientAddr)
	d, ok := rt.allow(ctx, lim, key)
	if !ok {
		return true
	}
	// Charged only once the request's own budget allowed it, so a client
	// over its limit does not use up its neighbours' shared cap.
	if d.Allowed && by != byAddress && rt.addressCap != nil {
		if cd, ok := rt.allow(ctx, rt.addressCap, "cap:"+addressKey(st.info.ClientAddr)); ok && !cd.Allowed {
			d, by = cd, byAddressCap
		}
	}
	// A password submission costs an argon2id hash: one address must not
	// keep a server's few hashing slots busy within its browser budget.
	if d.Allowed && rt.password != nil && c.Request.Method == http.MethodPost && slices.Contains(routes.PasswordPosts, st.path) {
		if pd, ok := rt.allow(ctx, rt.password, "pw:"+addressKey(st.info.ClientAddr)); ok && !pd.Allowed {
			d, by = pd, byPassword
		}
	}
	if d.Limit > 0 {
		reset := strconv.Itoa(ceilSeconds(d.ResetAfter, 0))
		limit, remaining := strconv.Itoa(d.Limit), strconv.Itoa(d.Remaining)
		st.hw.rate = []string{limit, remaining, reset}
	}
	if !d.Allowed {
		if rt.rejected != nil {
			rt.rejected(ctx, class, by)
		}
		secs := ceilSeconds(d.RetryAfter, 1)
		c.Writer.Header().Set("Retry-After", strconv.Itoa(secs))
		apierror.Respond(c.Writer, c.Request, http.StatusTooManyRequests, apierror.RateLimited,
			fmt.Sprintf("too many requests; retry after %d seconds", secs))
		return false
	}
	return true
}

// allow asks lim; ok is false when it could not decide (logged, at most
// every 10 s).
func (rt *router) allow(ctx context.Context, lim ratelimit.Limiter, key string) (d ratelimit.Decision, ok bool) {
	d, err := lim.Allow(ctx, key)
	if err != nil {
		rt.limiterWarn.Do(func() {
			rt.logger.WarnContext(ctx, "rate limiter failed; allowing requests", "error", err.Error())
		})
		return d, false
	}
	return d, true
}

func ceilSeconds(d time.Duration, minimum int) int {
	return max(int(math.Ceil(d.Seconds())), minimum)
}
