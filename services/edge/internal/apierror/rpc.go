package apierror

import (
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
)

// rpcErrors writes errors in the protocol of a gRPC, gRPC-web or Connect
// request. It takes a request for Connect only with Connect-Protocol-Version
// (connect=v1 on a GET): without it a JSON POST is a REST client's as much
// as a Connect client's, and a GET a browser's, and those keep the JSON
// error. connect-go's clients always send it.
var rpcErrors = connect.NewErrorWriter(connect.WithRequireConnectProtocolHeader())

// rpcCodes are the RPC codes of edge's errors, with the message sent when
// the error has no description.
//
// A path edge does not route is an unknown procedure, which gRPC servers
// answer with Unimplemented ("method not found", in gRPC's status code
// table) and which gRPC and Connect clients already read from an HTTP 404;
// NotFound is for an entity the RPC names (a user, an organization), which
// a client would take the refusal for. A body too large and a rate limit
// are both a budget the client exhausted: ResourceExhausted. An unreachable
// service is Unavailable, the code clients retry.
var rpcCodes = map[string]struct {
	code    connect.Code
	message string
}{
	NotFound:               {connect.CodeUnimplemented, "unknown procedure"},
	RequestTooLarge:        {connect.CodeResourceExhausted, "request too large"},
	RateLimited:            {connect.CodeResourceExhausted, "too many requests"},
	TemporarilyUnavailable: {connect.CodeUnavailable, "temporarily unavailable"},
	ServerError:            {connect.CodeInternal, "internal error"},
}

// WriteRPC answers in the RPC protocol of r — gRPC, gRPC-web or Connect —
// with the RPC code of edge's error code (code) and description as the
// message, when r's route takes RPCs or r matched no route
// (reqinfo.ErrorsRPC) and r declares one of those protocols. It reports
// whether it answered; if not, the caller answers as before. Headers the
// caller set (Retry-After) are sent.
func WriteRPC(w http.ResponseWriter, r *http.Request, code, description string) bool {
	info := reqinfo.FromContext(r.Context())
	if info == nil || info.Errors != reqinfo.ErrorsRPC || !mayBeRPC(r) || !rpcErrors.IsSupported(r) {
		return false
	}
	rc, ok := rpcCodes[code]
	if !ok {
		rc.code, rc.message = connect.CodeUnknown, code
	}
	if description != "" {
		rc.message = description
	}
	w.Header().Set("Cache-Control", "no-store")
	_ = rpcErrors.Write(headerOnWriteHeader{w}, r, connect.NewError(rc.code, errors.New(rc.message)))
	return true
}

// mayBeRPC is false for a request rpcErrors.IsSupported cannot take: most
// of what reaches unknown paths, which IsSupported would cost a parsed
// query and an error value each.
func mayBeRPC(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost:
		ct := r.Header.Get("Content-Type")
		return hasPrefixFold(ct, "application/grpc") || hasPrefixFold(ct, "application/connect+") ||
			r.Header.Get("Connect-Protocol-Version") != ""
	case http.MethodGet:
		return strings.Contains(r.URL.RawQuery, "connect=")
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// headerOnWriteHeader sends the response header on WriteHeader. The gRPC
// error is a header and trailers: the error writer calls WriteHeader and
// then adds the trailers to the header map, which net/http sends as
// trailers only once the header is out. gin's writer, which edge's
// middleware wraps, merely records the status on WriteHeader.
type headerOnWriteHeader struct{ http.ResponseWriter }

func (w headerOnWriteHeader) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	if now, ok := w.ResponseWriter.(interface{ WriteHeaderNow() }); ok {
		now.WriteHeaderNow()
	}
}
