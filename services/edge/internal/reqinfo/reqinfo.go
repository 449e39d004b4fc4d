package reqinfo

import "context"

// Info is set once per request by the router and never mutated afterwards,
// except Errors, which the router sets once it knows the route, before the
// request reaches a handler.
type Info struct {
	// RequestID is the sanitized or generated X-Request-Id.
	RequestID string
	// ClientAddr is the client's IP address: the TCP peer, or, when the peer
	// is a trusted proxy, the nearest untrusted address in X-Forwarded-For.
	ClientAddr string
	// PeerTrusted is true when the TCP peer is one of the configured trusted
	// proxies, so its X-Forwarded-* headers were kept.
	PeerTrusted bool
	// Errors is the form of edge's own error answers to the request
	// (apierror.Respond).
	Errors ErrorForm
}

// ErrorForm is the form edge's own error answers (404, 413, 429, 503, 500)
// take for a request, by the kind of client its route serves.
type ErrorForm uint8

const (
	// ErrorsJSON is the OAuth error shape {"error": ..., "error_description":
	// ...}: the OAuth/OIDC endpoints and the REST APIs, and any request
	// outside the router.
	ErrorsJSON ErrorForm = iota
	// ErrorsPage is an HTML page: a top-level navigation (a browser route),
	// where a person reads the answer.
	ErrorsPage
	// ErrorsRPC is the RPC protocol the request declares — gRPC, gRPC-web,
	// or Connect with its Connect-Protocol-Version header (or connect=v1 on
	// a GET) — and the OAuth error shape when it declares none: the gRPC and
	// Connect routes, and paths no route serves.
	ErrorsRPC
)

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
