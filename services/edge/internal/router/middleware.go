package router

import (
	"context"
	"errors"
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

// accessLog writes one line per request once the rest of the pipeline is
// done, also when the request ends in a panic that aborts the response.
// It logs the path only: query strings carry authorization codes and
// tokens.
func (rt *router) accessLog(c *gin.Context) {
	st := stateOf(c)
	defer rt.logAccess(c, st)
	c.Next()
}

func (rt *router) logAccess(c *gin.Context, st *state) {
	status := c.Writer.Status()
	level := slog.LevelInfo
	switch {
	case status >= 500:
		level = slog.LevelWarn
	case status < 400 && st.route != nil && st.route.Class == routes.ClassMetadata && !st.panicked:
		// Discovery and the key set: public, cacheable, the most frequent
		// requests; their successes are logged at debug, their failures
		// as every other request's.
		level = slog.LevelDebug
	}
	ctx := c.Request.Context()
	if !rt.logger.Enabled(ctx, level) {
		return
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
	if st.panicked {
		list = attrs[:]
	}
	rt.logger.LogAttrs(ctx, level, "request", list...)
}

// recovery is gin's recovery (gin.CustomRecoveryWithWriter) with edge's
// answer to a panic (recovered). gin takes a panic with
// http.ErrAbortHandler — the proxy's way to abort a broken stream — for a
// broken connection and ends the request normally, which would make a
// response cut short look complete; it is passed on to net/http, which
// aborts the response.
func (rt *router) recovery() gin.HandlerFunc {
	recovery := gin.CustomRecoveryWithWriter(nil, rt.recovered)
	return func(c *gin.Context) {
		recovery(c)
		if len(c.Errors) > 0 && errors.Is(c.Errors.Last().Err, http.ErrAbortHandler) {
			stateOf(c).panicked = true
			panic(http.ErrAbortHandler)
		}
	}
}

// recovered logs a panic and answers 500 {"error":"server_error"} (an
// HTML page on a browser route, the RPC error Internal to an RPC), never
// the panic itself. When the response had already started it aborts the
// response instead, so a truncated response never looks complete.
func (rt *router) recovered(c *gin.Context, p any) {
	st := stateOf(c)
	st.panicked = true
	rt.logger.ErrorContext(c.Request.Context(), "panic serving request",
		"panic", fmt.Sprint(p), "method", c.Request.Method, "path", st.path,
		"request_id", st.info.RequestID, "stack", string(debug.Stack()))
	if c.Writer.Written() {
		panic(http.ErrAbortHandler)
	}
	apierror.Respond(c.Writer, c.Request, http.StatusInternalServerError, apierror.ServerError, "")
	c.Abort()
}

// securityHeaders installs the headerWriter, which adds edge's headers
// (request id, policy, rate limit, CORS) when the response header is
// sent.
func (rt *router) securityHeaders(c *gin.Context) {
	st := stateOf(c)
	st.hw = headerWriter{ResponseWriter: c.Writer, hsts: rt.hsts}
	st.hw.requestID[0] = st.info.RequestID
	c.Writer = &st.hw
	c.Next()
	// gin sends the header of a response nothing was written to after
	// the handlers, bypassing the headerWriter.
	st.hw.apply()
}

// route starts the pipeline of a table route: it records the route gin
// matched (its pattern for the request metrics, the form of edge's errors,
// its service for the access log) and answers 404 for a path that is not
// canonical.
func (rt *router) route(c *gin.Context) {
	st := stateOf(c)
	spec := rt.specs[c.FullPath()]
	st.route = spec
	telemetry.SetRoute(c.Request.Context(), spec.Pattern)
	// "/management/v1/../gatehouse.directory.v1.…" matches a prefix here
	// but could name an internal service behind it.
	if !canonical(st.path) {
		st.info.Errors = reqinfo.ErrorsRPC // no route's: an unknown path
		answerNotFound(c)
		return
	}
	st.info.Errors = spec.errors
	st.service = spec.Service
}

// unmatched starts the pipeline of a path no route matches, before its
// rate limit (the browser class's) and the 404.
func (rt *router) unmatched(c *gin.Context) {
	telemetry.SetRoute(c.Request.Context(), "unmatched")
	stateOf(c).info.Errors = reqinfo.ErrorsRPC
}

// notFound is the last handler of a path no route matches.
func notFound(c *gin.Context) { answerNotFound(c) }

// answerNotFound answers 404 {"error":"not_found"}, or Unimplemented to a
// gRPC or Connect request (apierror.WriteRPC), and ends the pipeline.
func answerNotFound(c *gin.Context) {
	if !apierror.WriteRPC(c.Writer, c.Request, apierror.NotFound, "") {
		apierror.Write(c.Writer, http.StatusNotFound, apierror.NotFound, "")
	}
	c.Abort()
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

// cors answers the CORS preflight of a route browsers may call
// cross-origin (routes.Route.CORS), and has its other responses allow any
// origin.
func (rt *router) cors(c *gin.Context) {
	st := stateOf(c)
	if !st.route.cors {
		return
	}
	if preflight(c.Writer, c.Request) {
		c.Abort()
		return
	}
	st.hw.cors = true
}

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

// bodyDeadline has the request body arrive in time (Options.BodyTimeout),
// from the first byte the rate limiter may read of it.
func (rt *router) bodyDeadline(c *gin.Context) {
	if r := c.Request; r.Body != nil && r.Body != http.NoBody {
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(rt.bodyTimeout))
	}
}

// limit is the middleware of a rate-limit class's group: it charges the
// request to lim, the class's budget (see rateLimit).
func (rt *router) limit(class routes.Class, lim ratelimit.Limiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !rt.rateLimit(c, stateOf(c), class, lim) {
			c.Abort()
		}
	}
}

// rateLimit charges the request to lim, its class's budget (see rateKey;
// and to the address cap), and reports whether it may go on; when not, it
// has answered 429. A limiter error fails open: the limiter protects
// capacity and must not take the service down with it.
func (rt *router) rateLimit(c *gin.Context, st *state, class routes.Class, lim ratelimit.Limiter) bool {
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
