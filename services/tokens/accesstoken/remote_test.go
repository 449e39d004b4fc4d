package accesstoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
)

const issuer = "https://id.example.com"

// fakeTokens is the tokens service: a signing key, a revocation list,
// opaque tokens it introspects; down makes every call fail.
type fakeTokens struct {
	t       *testing.T
	mu      sync.Mutex
	key     jwk.Key
	pub     jwk.Set
	revoked []*tokensv1.Revocation
	opaque  map[string]*tokensv1.IntrospectResponse
	down    bool
	intro   int
	asks    int
}

func newFakeTokens(t *testing.T) *fakeTokens {
	f := &fakeTokens{t: t, opaque: map[string]*tokensv1.IntrospectResponse{}}
	f.rotate("k1")
	return f
}

func (f *fakeTokens) rotate(kid string) {
	raw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.t.Fatal(err)
	}
	k, _ := jwk.Import(raw)
	_ = k.Set(jwk.KeyIDKey, kid)
	_ = k.Set(jwk.AlgorithmKey, jwa.ES256())
	pk, _ := k.PublicKey()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pub == nil {
		f.pub = jwk.NewSet()
	}
	_ = f.pub.AddKey(pk)
	f.key = k
}

func (f *fakeTokens) sign(claims map[string]any) string { return f.signTyped("at+jwt", claims) }

// signTyped signs claims with the JOSE typ (none when "").
func (f *fakeTokens) signTyped(typ string, claims map[string]any) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(claims)
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, mustKid(f.key))
	if typ != "" {
		_ = hdr.Set(jws.TypeKey, typ)
	}
	out, err := jws.Sign(b, jws.WithKey(jwa.ES256(), f.key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(out)
}

func mustKid(k jwk.Key) string { kid, _ := k.KeyID(); return kid }

var errDown = connect.NewError(connect.CodeUnavailable, errors.New("down"))

func (f *fakeTokens) Introspect(_ context.Context, req *tokensv1.IntrospectRequest) (*tokensv1.IntrospectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intro++
	if f.down {
		return nil, errDown
	}
	if r, ok := f.opaque[req.GetToken()]; ok {
		return r, nil
	}
	return &tokensv1.IntrospectResponse{}, nil
}

func (f *fakeTokens) ListRevocations(_ context.Context, req *tokensv1.ListRevocationsRequest) (*tokensv1.ListRevocationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	// Simplest honest feed: everything, every time, cursor unchanged.
	return &tokensv1.ListRevocationsResponse{Revocations: f.revoked, Cursor: req.GetCursor()}, nil
}

func (f *fakeTokens) GetKeySet(context.Context, *tokensv1.GetKeySetRequest) (*tokensv1.GetKeySetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	b, _ := json.Marshal(f.pub)
	return &tokensv1.GetKeySetResponse{Jwks: b}, nil
}

// CheckRevoked answers from the service's list as it is now (the one
// ListRevocations serves a poll later).
func (f *fakeTokens) CheckRevoked(_ context.Context, req *tokensv1.CheckRevokedRequest) (*tokensv1.CheckRevokedResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asks++
	if f.down {
		return nil, errDown
	}
	m := req
	for _, r := range f.revoked {
		if r.GetId() == m.GetTokenId() || r.GetId() == "user:"+m.GetSubject() && !m.GetExpiresAt().AsTime().After(r.GetExpiresAt().AsTime()) {
			return &tokensv1.CheckRevokedResponse{Revoked: true}, nil
		}
	}
	return &tokensv1.CheckRevokedResponse{}, nil
}

func (f *fakeTokens) revoke(id string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, &tokensv1.Revocation{Id: id, ExpiresAt: timestamppb.New(until)})
}

func (f *fakeTokens) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }
func (f *fakeTokens) introspections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.intro
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func access(clk *clock, jti, sub string, extra map[string]any) map[string]any {
	now := clk.Now()
	c := map[string]any{"iss": issuer, "sub": sub, "aud": []string{"client", "gatehouse"}, "jti": jti, "client_id": "client",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func setup(t *testing.T) (*fakeTokens, *clock, *Remote) {
	t.Parallel()
	f := newFakeTokens(t)
	clk := &clock{t: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	c := NewRemote(f, RemoteOptions{Issuer: issuer, Audience: "gatehouse", Now: clk.Now, MaxStale: 10 * time.Minute})
	if err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f, clk, c
}

func want(t *testing.T, c *Remote, raw string, wantErr error, sub string) {
	t.Helper()
	got, err := c.Verify(context.Background(), raw)
	if !errors.Is(err, wantErr) || (wantErr == nil && got.Subject != sub) {
		t.Fatalf("Verify = %+v, %v; want subject %q, error %v", got, err, sub, wantErr)
	}
}

// JWTs are verified here, without introspection; anything that is not a
// management access token of this issuer is inactive.
func TestJWTVerifiedLocally(t *testing.T) {
	f, clk, c := setup(t)
	want(t, c, f.sign(access(clk, "j1", "alice", nil)), nil, "alice")
	// RFC 9068 §4: the header's typ names an access token (JWT: those
	// minted before Gatehouse wrote at+jwt); other JWTs are refused.
	for typ, ok := range map[string]bool{"application/at+jwt": true, "AT+JWT": true, "JWT": true,
		"dpop+jwt": false, "logout+jwt": false, "": false} {
		_, err := c.Verify(context.Background(), f.signTyped(typ, access(clk, "j-typ-"+typ, "alice", nil)))
		if (err == nil) != ok {
			t.Errorf("typ %q: %v; want accepted %v", typ, err, ok)
		}
	}
	for name, extra := range map[string]map[string]any{
		"other issuer":    {"iss": "https://evil.example.com"},
		"other audience":  {"aud": "client"},
		"ID token":        {"jti": nil, "client_id": nil},
		"expired":         {"exp": clk.Now().Add(-time.Second).Unix()},
		"not yet valid":   {"nbf": clk.Now().Add(2 * time.Minute).Unix()},
		"without subject": {"sub": ""},
	} {
		if _, err := c.Verify(context.Background(), f.sign(access(clk, "j-"+name, "alice", extra))); !errors.Is(err, ErrInactive) {
			t.Errorf("%s: %v; want inactive", name, err)
		}
	}
	// Signed by a key the tokens service never published.
	other := newFakeTokens(t)
	want(t, c, other.sign(access(clk, "j2", "alice", nil)), ErrInactive, "")
	// A key published since the set was read is fetched (at most every
	// keyRetry; the tokens service publishes a key a while before it signs).
	f.rotate("k2")
	clk.Advance(keyRetry)
	_ = c.Poll(context.Background())
	want(t, c, f.sign(access(clk, "j3", "bob", nil)), nil, "bob")
	if n := f.introspections(); n != 0 {
		t.Fatalf("%d introspections; want none for JWTs while in sync", n)
	}
}

// A revocation of the token or a cut-off of its user ends it at the next
// poll.
func TestRevocationsEndTokensAtTheNextPoll(t *testing.T) {
	f, clk, c := setup(t)
	ctx := context.Background()
	a, b := f.sign(access(clk, "ja", "alice", nil)), f.sign(access(clk, "jb", "bob", nil))
	want(t, c, a, nil, "alice")
	want(t, c, b, nil, "bob")
	f.revoke("ja", clk.Now().Add(time.Hour))
	f.revoke("user:bob", clk.Now().Add(2*time.Hour))
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, c, a, ErrInactive, "")
	want(t, c, b, ErrInactive, "")
	// Bob's later token (expiring after the cut-off) works.
	clk.Advance(90 * time.Minute)
	_ = c.Poll(ctx)
	want(t, c, f.sign(access(clk, "jb2", "bob", nil)), nil, "bob")
}

// A revocation counts once the tokens service recorded it, before the
// next poll brings it into the followed list: /revoke answered 200, and
// the management API refuses the token at once.
func TestRevocationsEndTokensAtOnce(t *testing.T) {
	f, clk, c := setup(t)
	a, b := f.sign(access(clk, "ja", "alice", nil)), f.sign(access(clk, "jb", "bob", nil))
	f.opaque["op"] = &tokensv1.IntrospectResponse{Active: true, Subject: "carol", Audience: []string{"gatehouse"}, TokenId: "o1",
		IssuedAt: timestamppb.New(clk.Now()), ExpiresAt: timestamppb.New(clk.Now().Add(time.Hour))}
	want(t, c, a, nil, "alice")
	want(t, c, b, nil, "bob")
	want(t, c, "op", nil, "carol")
	f.revoke("ja", clk.Now().Add(time.Hour))
	f.revoke("user:bob", clk.Now().Add(2*time.Hour))
	f.revoke("o1", clk.Now().Add(time.Hour))
	// No poll in between.
	want(t, c, a, ErrInactive, "")
	want(t, c, b, ErrInactive, "")
	want(t, c, "op", ErrInactive, "")
	// What the service said is kept: down before the next poll, the
	// tokens stay refused.
	f.setDown(true)
	want(t, c, a, ErrInactive, "")
	want(t, c, b, ErrInactive, "")
	want(t, c, "op", ErrInactive, "")
}

// Through a tokens outage: checked tokens and JWTs keep working for
// MaxStale after the last sync; an opaque token never seen is Unavailable.
func TestTokensOutage(t *testing.T) {
	f, clk, c := setup(t)
	ctx := context.Background()
	f.opaque["op-known"] = &tokensv1.IntrospectResponse{Active: true, Subject: "carol", Audience: []string{"gatehouse"}, TokenId: "o1",
		IssuedAt: timestamppb.New(clk.Now()), ExpiresAt: timestamppb.New(clk.Now().Add(time.Hour))}
	f.opaque["op-new"] = f.opaque["op-known"]
	want(t, c, "op-known", nil, "carol")
	jwt := f.sign(access(clk, "j1", "alice", nil))
	want(t, c, jwt, nil, "alice")
	fresh := f.sign(access(clk, "j2", "dave", nil))

	f.setDown(true)
	clk.Advance(5 * time.Minute)
	if err := c.Poll(ctx); err == nil {
		t.Fatal("poll of a down service succeeded")
	}
	want(t, c, "op-known", nil, "carol")
	want(t, c, jwt, nil, "alice")
	want(t, c, fresh, nil, "dave")
	want(t, c, "op-new", ErrUnavailable, "")

	clk.Advance(6 * time.Minute)
	want(t, c, jwt, ErrUnavailable, "")
	want(t, c, "op-known", ErrUnavailable, "")

	f.setDown(false)
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, c, jwt, nil, "alice")
}

// Without a revocation list (never synced, or not for MaxStale) every use
// asks the tokens service, and its outage is no verdict on the token.
func TestWithoutListAsksEachUse(t *testing.T) {
	t.Parallel()
	f := newFakeTokens(t)
	clk := &clock{t: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	c := NewRemote(f, RemoteOptions{Issuer: issuer, Audience: "gatehouse", Now: clk.Now})
	jwt := f.sign(access(clk, "j1", "alice", nil))
	want(t, c, jwt, nil, "alice")
	want(t, c, jwt, nil, "alice")
	f.mu.Lock()
	asks := f.asks
	f.mu.Unlock()
	if asks != 2 {
		t.Fatalf("%d revocation asks; want one per use", asks)
	}
	f.revoke("j1", clk.Now().Add(time.Hour))
	want(t, c, jwt, ErrInactive, "")
	f.setDown(true)
	want(t, c, f.sign(access(clk, "j2", "bob", nil)), ErrUnavailable, "")
	if c.Status() != "unknown" {
		t.Fatalf("status %q; want unknown", c.Status())
	}
}
