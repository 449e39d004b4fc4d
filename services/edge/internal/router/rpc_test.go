package router

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/edgetest"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/ratelimit"
	"github.com/gatehouse-id/gatehouse/services/edge/internal/routes"
)

// rpcProtocols are the protocols the management API is called in: Connect
// (binary) and gRPC-web over HTTP/1.1, gRPC over h2c.
var rpcProtocols = []struct {
	name   string
	client func(testing.TB) *http.Client
	opts   []connect.ClientOption
}{
	{"connect", edgetest.HTTP1Client, nil},
	{"grpc", edgetest.H2CClient, []connect.ClientOption{connect.WithGRPC()}},
	{"grpc-web", edgetest.HTTP1Client, []connect.ClientOption{connect.WithGRPCWeb()}},
}

// denyAll refuses every request: 5 a burst, retry after 3 s.
type denyAll struct{}

func (denyAll) Allow(context.Context, string) (ratelimit.Decision, error) {
	return ratelimit.Decision{Limit: 5, RetryAfter: 3 * time.Second, ResetAfter: 3 * time.Second}, nil
}

// TestRPCRefusalsSpeakTheRPCProtocol: edge's own refusals of a management
// API call — an unknown procedure, a body over the RPC limit, a rate limit,
// an unreachable service, a panic — reach the generated client, over
// Connect, gRPC and gRPC-web, as a *connect.Error with the RPC code
// (Unimplemented, ResourceExhausted, ResourceExhausted, Unavailable,
// Internal), with Retry-After where the JSON answer has it, and without the
// call reaching the service.
func TestRPCRefusalsSpeakTheRPCProtocol(t *testing.T) {
	type refusal struct {
		name       string
		configure  func(*Options)
		prepare    func(*fixture)
		basePath   string // between edge's URL and the procedure
		id         string
		code       connect.Code
		message    string // in the error's message
		retryAfter string
	}
	refusals := []refusal{
		{name: "unknown procedure", basePath: "/v1", code: connect.CodeUnimplemented, message: "unknown procedure"},
		{name: "non-canonical path", basePath: "/management/v1/..", code: connect.CodeUnimplemented, message: "unknown procedure"},
		{name: "body too large", configure: func(o *Options) { o.MaxRPCBodyBytes = 256 }, id: strings.Repeat("x", 1024),
			code: connect.CodeResourceExhausted, message: "request body larger than 256 bytes"},
		{name: "rate limited", configure: func(o *Options) { o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassAPI: denyAll{}} },
			code: connect.CodeResourceExhausted, message: "too many requests; retry after 3 seconds", retryAfter: "3"},
		{name: "panic", prepare: func(f *fixture) {
			f.backends[routes.Directory].Respond = func(http.ResponseWriter, *http.Request) { panic("secret detail") }
		}, code: connect.CodeInternal, message: "internal error"},
	}
	for _, mode := range modes {
		for _, rf := range refusals {
			if rf.name == "panic" && mode == "proxied" {
				continue // a panic in another process is that process's
			}
			t.Run(mode+"/"+rf.name, func(t *testing.T) {
				f := newFixture(t, mode, rf.configure)
				if rf.prepare != nil {
					rf.prepare(f)
				}
				for _, p := range rpcProtocols {
					client := managementv1connect.NewManagementServiceClient(p.client(t), f.url(rf.basePath), p.opts...)
					before := len(f.backends[routes.Directory].Requests())
					_, err := client.GetUserByID(t.Context(), &managementv1.GetUserByIDRequest{Id: rf.id})
					checkRPCError(t, p.name, err, rf.code, rf.message, rf.retryAfter)
					if rf.name != "body too large" && rf.name != "panic" && len(f.backends[routes.Directory].Requests()) != before {
						t.Errorf("%s: the refused call reached the service", p.name)
					}
				}
			})
		}
	}

	t.Run("proxied/service unavailable", func(t *testing.T) {
		f := newFixture(t, "proxied", nil)
		f.servers[routes.Directory].Stop()
		for _, p := range rpcProtocols {
			client := managementv1connect.NewManagementServiceClient(p.client(t), f.url(""), p.opts...)
			_, err := client.GetUserByID(t.Context(), &managementv1.GetUserByIDRequest{Id: "u1"})
			checkRPCError(t, p.name, err, connect.CodeUnavailable, "directory service unavailable", "5")
		}
	})
}

func checkRPCError(t *testing.T, protocol string, err error, code connect.Code, message, retryAfter string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Errorf("%s: got %v; want a *connect.Error", protocol, err)
		return
	}
	if ce.Code() != code || !strings.Contains(ce.Message(), message) {
		t.Errorf("%s: got %v (code %v, message %q); want code %v with %q", protocol, ce, ce.Code(), ce.Message(), code, message)
	}
	if strings.Contains(ce.Message(), "secret") {
		t.Errorf("%s: the error %q leaks the panic", protocol, ce.Message())
	}
	if got := ce.Meta().Get("Retry-After"); got != retryAfter {
		t.Errorf("%s: Retry-After %q; want %q", protocol, got, retryAfter)
	}
	if ce.Meta().Get("X-Request-Id") == "" {
		t.Errorf("%s: the error lacks edge's headers: %v", protocol, ce.Meta())
	}
}

// TestRefusalsKeepTheirFormOffRPC: the RPC protocol is for gRPC and Connect
// routes and unknown paths, and for requests that declare it. An OAuth
// route answers a gRPC-typed request with the OAuth JSON error, the REST
// management API answers a Connect-typed request with it too (as it did
// before edge spoke RPC), and an RPC route answers a request declaring no
// RPC protocol, or Connect without its version header, with it.
func TestRefusalsKeepTheirFormOffRPC(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, mode, func(o *Options) {
				o.MaxBodyBytes, o.MaxRPCBodyBytes = 256, 256
				o.Limiters = map[routes.Class]ratelimit.Limiter{routes.ClassAPI: denyAll{}}
			})
			grpc := map[string]string{"Content-Type": "application/grpc", "Te": "trailers"}
			connectJSON := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
			cases := []struct {
				name, path string
				header     map[string]string
				body       string
				status     int
				error      string
			}{
				{"gRPC to the token endpoint, too large", "/oauth/v2/token", grpc, strings.Repeat("x", 300), 413, "request_too_large"},
				{"Connect to userinfo, rate limited", "/oidc/v1/userinfo", connectJSON, "", 429, "rate_limited"},
				{"Connect to the REST API, rate limited", "/management/v1/users/me", connectJSON, "", 429, "rate_limited"},
				{"no RPC protocol on an RPC route", "/gatehouse.management.v1.ManagementService/GetMyOrg", nil, "", 429, "rate_limited"},
				{"Connect without its version header", "/gatehouse.management.v1.ManagementService/GetMyOrg",
					map[string]string{"Content-Type": "application/json"}, "{}", 429, "rate_limited"},
				{"JSON to an unknown path", "/gatehouse.directory.v1.DirectoryService/GetUser",
					map[string]string{"Content-Type": "application/json"}, "{}", 404, "not_found"},
			}
			for _, c := range cases {
				for _, client := range []*http.Client{edgetest.H2CClient(t), edgetest.HTTP1Client(t)} {
					req, _ := http.NewRequest(http.MethodPost, f.url(c.path), strings.NewReader(c.body))
					for k, v := range c.header {
						req.Header.Set(k, v)
					}
					resp, body := edgetest.Do(t, client, req)
					if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Grpc-Status") != "" {
						t.Errorf("%s (%s): got %d %q %q; want %d and the JSON error", c.name, resp.Proto, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status)
						continue
					}
					if e := decodeError(t, body); e["error"] != c.error {
						t.Errorf("%s (%s): got %q; want error %s", c.name, resp.Proto, body, c.error)
					}
				}
			}
		})
	}
}
