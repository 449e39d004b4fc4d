package rpc_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"connectrpc.com/connect"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
)

type revocations struct {
	tokensv1connect.UnimplementedTokenServiceHandler
}

func (revocations) ListRevocations(_ context.Context, req *tokensv1.ListRevocationsRequest) (*tokensv1.ListRevocationsResponse, error) {
	return &tokensv1.ListRevocationsResponse{Cursor: req.GetCursor() + "+1"}, nil
}

func (revocations) RevokeSession(context.Context, *tokensv1.RevokeSessionRequest) (*tokensv1.RevokeSessionResponse, error) {
	return &tokensv1.RevokeSessionResponse{}, nil
}

// methods records the HTTP method of every request it serves.
type methods struct {
	mu   sync.Mutex
	seen []string
	next http.Handler
}

func (m *methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.seen = append(m.seen, r.Method)
	m.mu.Unlock()
	m.next.ServeHTTP(w, r)
}

// The in-memory client reaches a handler through the same interceptors as
// the network: the internal credential is checked, reads are GETs, and a
// handler not bound yet is Unavailable.
func TestInMemoryClient(t *testing.T) {
	t.Parallel()
	const token = "in-memory-test-token-0123456789abcdef"
	hopts, err := rpc.InternalHandlerOptions(token)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(tokensv1connect.NewTokenServiceHandler(revocations{}, hopts...))
	late := &rpc.LateHandler{}
	client := func(tok string) tokensv1connect.TokenServiceClient {
		copts, err := rpc.InternalClientOptions(tok)
		if err != nil {
			t.Fatal(err)
		}
		return tokensv1connect.NewTokenServiceClient(rpc.NewInMemoryClient(late), "http://tokens.internal", copts...)
	}
	ctx := context.Background()
	if _, err := client(token).ListRevocations(ctx, &tokensv1.ListRevocationsRequest{}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("before Bind: %v; want Unavailable", err)
	}
	rec := &methods{next: mux}
	late.Bind(rec)
	res, err := client(token).ListRevocations(ctx, &tokensv1.ListRevocationsRequest{Cursor: "c"})
	if err != nil || res.GetCursor() != "c+1" {
		t.Fatalf("ListRevocations: %v, %v", res, err)
	}
	if _, err := client(token).RevokeSession(ctx, &tokensv1.RevokeSessionRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client("another-token-0123456789abcdef0123").ListRevocations(ctx, &tokensv1.ListRevocationsRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("wrong credential: %v; want Unauthenticated", err)
	}
	if _, err := client(token).GetKeySet(ctx, &tokensv1.GetKeySetRequest{}); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("unimplemented: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) < 2 || rec.seen[0] != http.MethodGet || rec.seen[1] != http.MethodPost {
		t.Fatalf("methods %v; want GET for the read, POST for the revocation", rec.seen)
	}
}

// BenchmarkInMemoryCall is the cost of one internal call of the embedded
// process through the in-memory client (encode, interceptors, handler,
// decode), beside the direct method call it replaced.
func BenchmarkInMemoryCall(b *testing.B) {
	const token = "in-memory-test-token-0123456789abcdef"
	hopts, _ := rpc.InternalHandlerOptions(token)
	copts, _ := rpc.InternalClientOptions(token)
	mux := http.NewServeMux()
	mux.Handle(tokensv1connect.NewTokenServiceHandler(revocations{}, hopts...))
	client := tokensv1connect.NewTokenServiceClient(rpc.NewInMemoryClient(mux), "http://tokens.internal", copts...)
	req := &tokensv1.ListRevocationsRequest{Cursor: "c"}
	b.Run("in-memory", func(b *testing.B) {
		for b.Loop() {
			if _, err := client.ListRevocations(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		var h tokensv1connect.TokenServiceHandler = revocations{}
		for b.Loop() {
			if _, err := h.ListRevocations(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
