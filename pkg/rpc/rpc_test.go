package rpc_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
)

const procedure = "/gatehouse.test.v1.EchoService/Echo"

func echo(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
	return connect.NewResponse(wrapperspb.String("echo:" + req.Msg.GetValue())), nil
}

// serveH2C serves h on a loopback port over HTTP/1.1 and h2c.
func serveH2C(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func internalServer(t *testing.T, token string) string {
	t.Helper()
	opts, err := rpc.InternalHandlerOptions(token)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, echo, opts...))
	return serveH2C(t, mux)
}

func TestInternalCredential(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	base := internalServer(t, token)
	cases := []struct {
		name     string
		token    string
		protocol connect.ClientOption
		wantCode connect.Code // 0 = success
		http2    bool         // gRPC needs HTTP/2; internal calls use Connect over HTTP/1.1
	}{
		{"connect with token", token, connect.WithProtoJSON(), 0, false},
		{"grpc with token", token, connect.WithGRPC(), 0, true},
		{"grpc-web with token", token, connect.WithGRPCWeb(), 0, false},
		{"wrong token", token + "x", connect.WithGRPC(), connect.CodeUnauthenticated, true},
		{"no token", "", connect.WithProtoJSON(), connect.CodeUnauthenticated, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := rpc.InternalClientOptions(tc.token)
			if err != nil {
				t.Fatal(err)
			}
			hc := rpc.NewHTTPClient()
			if tc.http2 {
				hc = &http.Client{Transport: rpc.NewH2CTransport()}
			}
			c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](hc, base+procedure, append(opts, tc.protocol)...)
			res, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("call: %v", err)
				}
				if got := res.Msg.GetValue(); got != "echo:hi" {
					t.Fatalf("got %q; want echo:hi", got)
				}
				return
			}
			if got := connect.CodeOf(err); got != tc.wantCode {
				t.Fatalf("code = %v (%v); want %v", got, err, tc.wantCode)
			}
		})
	}
}

func TestInternalCredentialEmptyServerTokenRefusesAll(t *testing.T) {
	base := internalServer(t, "")
	opts, _ := rpc.InternalClientOptions("")
	c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](rpc.NewHTTPClient(), base+procedure, opts...)
	_, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("code = %v; want unauthenticated", connect.CodeOf(err))
	}
}

// TestTracePropagation: an HTTP request into service A (HTTP middleware)
// makes a Connect call to service B; B's server span must belong to the same
// trace as A's HTTP span, as a descendant.
func TestTracePropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	const token = "0123456789abcdef0123456789abcdef"
	bURL := internalServer(t, token)
	copts, err := rpc.InternalClientOptions(token)
	if err != nil {
		t.Fatal(err)
	}
	bClient := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](rpc.NewHTTPClient(), bURL+procedure, copts...)
	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		if _, err := bClient.CallUnary(r.Context(), connect.NewRequest(wrapperspb.String("x"))); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(204)
	})
	a := telemetry.HTTPMiddleware(mux)
	aURL := serveH2C(t, a)
	hc := &http.Client{Transport: telemetry.HTTPTransport(http.DefaultTransport, nil)}
	ctx, root := tp.Tracer("test").Start(context.Background(), "client")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, aURL+"/work", nil)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	root.End()
	if res.StatusCode != 204 {
		t.Fatalf("status %d; want 204", res.StatusCode)
	}
	spans := exp.GetSpans()
	var httpSpan, serverSpan *tracetest.SpanStub
	for i := range spans {
		s := &spans[i]
		switch {
		case s.Name == "GET /work":
			httpSpan = s
		case s.Name == "gatehouse.test.v1.EchoService/Echo" && s.SpanKind.String() == "server":
			serverSpan = s
		}
	}
	if httpSpan == nil || serverSpan == nil {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name+"/"+s.SpanKind.String())
		}
		t.Fatalf("missing spans; got %v", names)
	}
	want := root.SpanContext().TraceID()
	if httpSpan.SpanContext.TraceID() != want || serverSpan.SpanContext.TraceID() != want {
		t.Fatalf("trace ids: http %v, connect server %v; want both %v", httpSpan.SpanContext.TraceID(), serverSpan.SpanContext.TraceID(), want)
	}
	if !serverSpan.Parent.IsValid() || !serverSpan.Parent.IsRemote() {
		t.Fatalf("connect server span parent = %+v; want a remote parent", serverSpan.Parent)
	}
}

// recordEncoding remembers the Content-Encoding of every reply.
type recordEncoding struct {
	next      http.RoundTripper
	encodings []string
}

func (r *recordEncoding) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.next.RoundTrip(req)
	if err == nil {
		r.encodings = append(r.encodings, res.Header.Get("Content-Encoding"))
	}
	return res, err
}

// Internal replies are not compressed: gzip costs more CPU than a few
// hundred bytes on one network save. Another caller asking for gzip gets
// only large replies compressed.
func TestInternalRepliesUncompressed(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	base := internalServer(t, token)
	call := func(opts []connect.ClientOption, size int) string {
		t.Helper()
		rec := &recordEncoding{next: rpc.NewHTTPClient().Transport}
		c := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](&http.Client{Transport: rec}, base+procedure, opts...)
		in := strings.Repeat("a", size)
		res, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String(in)))
		if err != nil || res.Msg.GetValue() != "echo:"+in {
			t.Fatalf("call of %d bytes: %v", size, err)
		}
		return rec.encodings[0]
	}
	internal, err := rpc.InternalClientOptions(token)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{10, 200 << 10} {
		if enc := call(internal, size); enc != "" {
			t.Errorf("internal client, %d-byte reply: Content-Encoding %q; want none", size, enc)
		}
	}
	// A plain Connect client accepts gzip by default.
	other := []connect.ClientOption{connect.WithInterceptors(rpc.NewInternalAuth(token))}
	if enc := call(other, 1000); enc != "" {
		t.Errorf("gzip-accepting client, small reply: Content-Encoding %q; want none", enc)
	}
	if enc := call(other, 200<<10); enc != "gzip" {
		t.Errorf("gzip-accepting client, 200 KiB reply: Content-Encoding %q; want gzip", enc)
	}
}
