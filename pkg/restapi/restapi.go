// Package restapi serves a Connect service as REST too, the way every
// Gatehouse API does: vanguard transcodes the google.api.http routes; JSON
// bodies ignore unknown fields but refuse unknown enum names; a malformed
// body is InvalidArgument (400) with an ErrorDetail, not vanguard's default
// Unknown (500); any error that is not a connect error is logged and
// becomes Internal without its detail.
package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

// Error returns a connect error with code and one ErrorDetail{id, message};
// REST clients receive it as google.rpc.Status JSON
// {code, message, details[{@type, id, message}]}.
func Error(code connect.Code, id, format string, args ...any) *connect.Error {
	msg := fmt.Sprintf(format, args...)
	e := connect.NewError(code, errors.New(msg))
	if d, err := connect.NewErrorDetail(&managementv1.ErrorDetail{Id: id, Message: msg}); err == nil {
		e.AddDetail(d)
	}
	return e
}

// MaxMessageBytes bounds a request message as a public handler reads it,
// decompressed. connect-go and vanguard read a message whole, and
// decompress it, before any interceptor runs: without a bound, a 4 MiB
// gzip body (all edge admits) of an anonymous caller expands to gigabytes.
// Edge admits bodies of at most 4 MiB, so an uncompressed request never
// comes near it.
const MaxMessageBytes = 8 << 20

// HandlerOptions are the options every public Connect handler gets: the
// message bound, the JSON codec and error normalisation (first), then
// interceptors in order.
func HandlerOptions(logger *slog.Logger, interceptors ...connect.Interceptor) []connect.HandlerOption {
	all := append([]connect.Interceptor{errorInterceptor{logger}}, interceptors...)
	return []connect.HandlerOption{connect.WithInterceptors(all...), connect.WithCodec(connectJSON{}), connect.WithReadMaxBytes(MaxMessageBytes)}
}

// Transcoder wraps the Connect handler h of service path in vanguard. Path
// parameters are decoded exactly once (see escapedPath), so a value may
// contain any character, "/" and "%" included, percent-encoded.
func Transcoder(path string, h http.Handler) (http.Handler, error) {
	tc, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(path, h, vanguard.WithMaxMessageBufferBytes(MaxMessageBytes))},
		vanguard.WithCodec(func(r vanguard.TypeResolver) vanguard.Codec { return vanguardJSON{vanguard.NewJSONCodec(r)} }))
	if err != nil {
		return nil, fmt.Errorf("transcoder for %s: %w", path, err)
	}
	bodies, err := bodyRoutes(path)
	if err != nil {
		return nil, err
	}
	return refuseUnmappable(bodies, escapedPath(connectWithoutHeader(path, jsonBodies(path, grpcWebText(tc))))), nil
}

// jsonBodies reads a REST request's body as JSON whatever its
// Content-Type says when that names no other format Gatehouse speaks: curl
// -d sends application/x-www-form-urlencoded, and ZITADEL's gateway, whose
// recipes people copy, reads JSON regardless (vanguard answered 415). Not
// a CSRF door: the management API authenticates by a Bearer header, which
// no cross-site form can send.
func jsonBodies(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, path) && r.Method != http.MethodGet && r.Method != http.MethodHead {
			switch mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(strings.ToLower(mt)) {
			case "", "application/x-www-form-urlencoded", "text/plain":
				r.Header.Set("Content-Type", "application/json")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// connectWithoutHeader marks a unary Connect call made without the
// optional Connect-Protocol-Version header (connectrpc.com's own curl
// recipe sends none) as Connect: vanguard would take it for REST and
// answer 404, since no REST route is a procedure path.
func connectWithoutHeader(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, path) && r.Header.Get("Connect-Protocol-Version") == "" {
			switch mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(strings.ToLower(mt)) {
			case "application/json", "application/proto":
				r.Header.Set("Connect-Protocol-Version", "1")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyRoutes lists the path templates (split at "/") of the service's
// GET and DELETE routes that take a body (BulkRemoveUserMetadata does).
func bodyRoutes(path string) (map[string][][]string, error) {
	name := protoreflect.FullName(strings.Trim(path, "/"))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return nil, fmt.Errorf("transcoder for %s: %w", path, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("transcoder for %s: not a service", path)
	}
	out := map[string][][]string{}
	for i := 0; i < sd.Methods().Len(); i++ {
		rule, _ := proto.GetExtension(sd.Methods().Get(i).Options(), annotations.E_Http).(*annotations.HttpRule)
		if rule == nil || rule.GetBody() == "" {
			continue
		}
		switch {
		case rule.GetGet() != "":
			out[http.MethodGet] = append(out[http.MethodGet], strings.Split(rule.GetGet(), "/"))
		case rule.GetDelete() != "":
			out[http.MethodDelete] = append(out[http.MethodDelete], strings.Split(rule.GetDelete(), "/"))
		}
	}
	return out, nil
}

// matchesTemplate reports whether the encoded path's segments fit a route
// template: a {variable} matches any one non-empty segment.
func matchesTemplate(segs, tmpl []string) bool {
	if len(segs) != len(tmpl) {
		return false
	}
	for i, t := range tmpl {
		if strings.HasPrefix(t, "{") {
			if segs[i] == "" {
				return false
			}
		} else if segs[i] != t {
			return false
		}
	}
	return true
}

// refuseUnmappable answers 400 INVALID_ARGUMENT, in the google.rpc.Status
// shape of every other REST error, for requests vanguard would answer 500
// Unknown: a body on a GET, HEAD or DELETE route that takes none, and a
// path that is not UTF-8 once decoded (proto strings must be).
func refuseUnmappable(bodies map[string][][]string, next http.Handler) http.Handler {
	takesBody := func(r *http.Request) bool {
		segs := strings.Split(decodeUnreserved(r.URL.EscapedPath()), "/")
		for _, t := range bodies[r.Method] {
			if matchesTemplate(segs, t) {
				return true
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg string
		switch {
		case (r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodDelete) &&
			(r.ContentLength > 0 || (r.ContentLength < 0 && len(r.TransferEncoding) > 0)) && !takesBody(r):
			msg = r.Method + " requests to this route take no body"
		case !utf8.ValidString(r.URL.Path):
			msg = "the path is not valid UTF-8 once percent-decoded"
		default:
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": int(connect.CodeInvalidArgument), "message": msg, "details": []any{}})
	})
}

// escapedPath hands next the request path as the client encoded it.
// vanguard (v0.4.0) matches REST routes against r.URL.Path, which net/http
// has already percent-decoded, and then decodes each captured segment a
// second time: "a%2Fb" split into two segments (404) and "a%2541" became
// "aA". Given the encoded path, it splits segments only at the client's own
// "/" and decodes each value once. Escapes of unreserved characters are
// decoded first (RFC 3986 §6.2.2.2: equivalent URIs), so literal segments
// such as "_bulk" and RPC procedure paths match however they are encoded.
func escapedPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := decodeUnreserved(r.URL.EscapedPath())
		if p == r.URL.Path {
			next.ServeHTTP(w, r)
			return
		}
		// A shallow copy, as http.StripPrefix does: handlers around this one
		// keep seeing the request as received.
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = p, ""
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// decodeUnreserved decodes the percent-encoded unreserved characters
// (ALPHA, DIGIT, "-", ".", "_", "~") of an encoded path and keeps every
// other escape as it is.
//
// A decoded hex digit right after a malformed escape ("%" or "%7") stays
// encoded: decoding it would make an escape the client never sent
// ("%7%41" would become "%7A", a "z" to the next decoder). The fuzzer
// found that one.
func decodeUnreserved(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if c := hi<<4 | lo; ok1 && ok2 && unreserved(c) && !completesEscape(b.String(), c) {
				b.WriteByte(c)
				i += 2
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// completesEscape reports whether appending c to out would turn its end
// into a percent-escape: out ends with "%", or with "%" and a hex digit,
// and c is a hex digit.
func completesEscape(out string, c byte) bool {
	if _, hex := unhex(c); !hex {
		return false
	}
	n := len(out)
	if n >= 1 && out[n-1] == '%' {
		return true
	}
	if n >= 2 && out[n-2] == '%' {
		_, hex := unhex(out[n-1])
		return hex
	}
	return false
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func malformed(err error) error {
	return Error(connect.CodeInvalidArgument, "API-malformed-json", "malformed JSON body: %v", err)
}

// unmarshal ignores unknown fields but refuses an unknown enum name, which
// protojson's DiscardUnknown would quietly make the zero value.
func unmarshal(opts protojson.UnmarshalOptions, b []byte, m proto.Message) error {
	opts.DiscardUnknown = false
	err := opts.Unmarshal(b, m)
	if err != nil && strings.Contains(err.Error(), "unknown field") {
		proto.Reset(m)
		opts.DiscardUnknown = true
		err = opts.Unmarshal(b, m)
	}
	return err
}

// vanguardJSON is vanguard's JSON codec with unmarshal's rules.
type vanguardJSON struct{ *vanguard.JSONCodec }

func (c vanguardJSON) Unmarshal(b []byte, m proto.Message) error {
	if err := unmarshal(c.UnmarshalOptions, b, m); err != nil {
		return malformed(err)
	}
	return nil
}

func (c vanguardJSON) UnmarshalField(b []byte, m proto.Message, f protoreflect.FieldDescriptor) error {
	if err := c.JSONCodec.UnmarshalField(b, m, f); err != nil {
		return malformed(err)
	}
	return nil
}

// connectJSON is connect-go's JSON codec with unmarshal's rules; REST
// bodies reach the handler as Connect JSON through vanguard.
type connectJSON struct{}

func (connectJSON) Name() string { return "json" }

func (connectJSON) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("json codec: %T is not a proto.Message", v)
	}
	return protojson.Marshal(m)
}

func (connectJSON) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("json codec: %T is not a proto.Message", v)
	}
	if len(b) == 0 {
		return nil // an empty body is an empty message, as in connect-go
	}
	if err := unmarshal(protojson.UnmarshalOptions{}, b, m); err != nil {
		return malformed(err)
	}
	return nil
}

// RetryAfter is the Retry-After (seconds) of every Unavailable answer.
const RetryAfter = "5"

// Unavailable is the answer to a dependency outage: 503 / UNAVAILABLE with
// Retry-After, so clients retry instead of dropping good credentials.
func Unavailable(format string, args ...any) *connect.Error {
	ce := connect.NewError(connect.CodeUnavailable, fmt.Errorf(format, args...))
	ce.Meta().Set("Retry-After", RetryAfter)
	return ce
}

// errorInterceptor keeps connect errors (adding Retry-After to
// Unavailable ones), maps cancellation to its code and a database outage
// to Unavailable, and logs anything else, which the client sees only as
// Internal.
type errorInterceptor struct{ logger *slog.Logger }

func (e errorInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err == nil || req.Spec().IsClient {
			return res, err
		}
		var ce *connect.Error
		switch {
		case errors.As(err, &ce):
			if ce.Code() == connect.CodeUnavailable {
				telemetry.Unavailable(ctx, "management")
				if ce.Meta().Get("Retry-After") == "" {
					ce.Meta().Set("Retry-After", RetryAfter)
				}
			}
			return nil, ce
		case errors.Is(err, context.Canceled):
			return nil, connect.NewError(connect.CodeCanceled, err)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			// The caller's own deadline.
			return nil, connect.NewError(connect.CodeDeadlineExceeded, err)
		case db.IsUnavailable(err):
			e.logger.WarnContext(ctx, "storage unavailable", "procedure", req.Spec().Procedure, "err", err)
			telemetry.Unavailable(ctx, "management")
			return nil, Unavailable("storage temporarily unavailable; retry")
		}
		e.logger.ErrorContext(ctx, "call failed", "procedure", req.Spec().Procedure, "err", err)
		return nil, connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

func (e errorInterceptor) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

func (e errorInterceptor) WrapStreamingHandler(n connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return n
}
