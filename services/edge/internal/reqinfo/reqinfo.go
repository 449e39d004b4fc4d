package reqinfo

import "context"

// Info is set once per request by the router and never mutated afterwards.
type Info struct {
	// RequestID is the sanitized or generated X-Request-Id.
	RequestID string
	// ClientAddr is the client's IP address: the TCP peer, or, when the peer
	// is a trusted proxy, the nearest untrusted address in X-Forwarded-For.
	ClientAddr string
	// PeerTrusted is true when the TCP peer is one of the configured trusted
	// proxies, so its X-Forwarded-* headers were kept.
	PeerTrusted bool
	// Page: the route is a top-level navigation (a browser route); edge's
	// own errors for it are HTML pages (apierror.Respond). Set by the
	// router before the request reaches a handler.
	Page bool
}

type ctxKey struct{}

// NewContext returns ctx carrying info.
func NewContext(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, ctxKey{}, info)
}

// FromContext returns the Info set by the router, or nil outside the router.
func FromContext(ctx context.Context) *Info {
	info, _ := ctx.Value(ctxKey{}).(*Info)
	return info
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	if info := FromContext(ctx); info != nil {
		return info.RequestID
	}
	return ""
}
