// Package mgmttest runs the directory service for tests: the real service
// (service.New) on a real SQLite file or PostgreSQL database, served over
// HTTP/1.1 and h2c on a loopback port, with clients for every protocol the
// management API speaks (REST, Connect, gRPC, gRPC-web). Access tokens are
// checked by a table-backed introspector standing in for the tokens
// service, so each test mints tokens for the users it needs.
package mgmttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs/domaincheck/dnstest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
	"github.com/gatehouse-id/gatehouse/services/directory/migrations"
	"github.com/gatehouse-id/gatehouse/services/directory/service"
)

// Introspector maps tokens to subjects, standing in for the tokens service.
type Introspector struct {
	mu     sync.Mutex
	tokens map[string]*tokensv1.IntrospectResponse
	// Cut lists the users whose tokens RevokeUserTokens revoked, in order.
	Cut []string
}

// RevokeUserTokens implements the tokens service's RevokeUserTokens: every
// token of the user minted so far becomes inactive.
func (i *Introspector) RevokeUserTokens(_ context.Context, req *tokensv1.RevokeUserTokensRequest) (*tokensv1.RevokeUserTokensResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.tokens {
		if r.GetSubject() == req.GetUserId() {
			r.Active = false
		}
	}
	i.Cut = append(i.Cut, req.GetUserId())
	return &tokensv1.RevokeUserTokensResponse{}, nil
}

// RevokeGrantTokens records the grant's organization in Cut as "grant:<org>".
func (i *Introspector) RevokeGrantTokens(_ context.Context, req *tokensv1.RevokeGrantTokensRequest) (*tokensv1.RevokeGrantTokensResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.Cut = append(i.Cut, "grant:"+req.GetOrgId())
	return &tokensv1.RevokeGrantTokensResponse{}, nil
}

// RevokeImpersonations records the organization in Cut as
// "impersonations:<org>".
func (i *Introspector) RevokeImpersonations(_ context.Context, req *tokensv1.RevokeImpersonationsRequest) (*tokensv1.RevokeImpersonationsResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.Cut = append(i.Cut, "impersonations:"+req.GetOrgId())
	return &tokensv1.RevokeImpersonationsResponse{}, nil
}

// CutUsers returns a copy of Cut.
func (i *Introspector) CutUsers() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]string(nil), i.Cut...)
}

// ListRevocations is not offered: the directory then asks CheckRevoked
// about every use of a token, so the map above decides.
func (i *Introspector) ListRevocations(context.Context, *tokensv1.ListRevocationsRequest) (*tokensv1.ListRevocationsResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no revocation list"))
}

// CheckRevoked answers from the table: a token revoked (removed) or made
// inactive is revoked. Without a followed revocation list the directory
// asks it on every use.
func (i *Introspector) CheckRevoked(_ context.Context, req *tokensv1.CheckRevokedRequest) (*tokensv1.CheckRevokedResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.tokens {
		if r.GetTokenId() == req.GetTokenId() {
			return &tokensv1.CheckRevokedResponse{Revoked: !r.GetActive()}, nil
		}
	}
	return &tokensv1.CheckRevokedResponse{Revoked: true}, nil
}

// GetKeySet is not offered (the test tokens are not JWTs).
func (i *Introspector) GetKeySet(context.Context, *tokensv1.GetKeySetRequest) (*tokensv1.GetKeySetResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("no key set"))
}

// Introspect implements the tokens service's internal Introspect.
func (i *Introspector) Introspect(_ context.Context, req *tokensv1.IntrospectRequest) (*tokensv1.IntrospectResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	r, ok := i.tokens[req.GetToken()]
	if !ok || !r.GetActive() || time.Now().After(r.GetExpiresAt().AsTime()) {
		return &tokensv1.IntrospectResponse{}, nil
	}
	return r, nil
}

// Mint returns a new active management token for userID.
func (i *Introspector) Mint(userID string) string {
	return i.MintWith(userID, []string{"gatehouse"}, time.Hour)
}

// MintWith returns a token with the given audience and lifetime.
func (i *Introspector) MintWith(userID string, aud []string, ttl time.Duration) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	i.mu.Lock()
	// Issued to the user itself, as a machine user's JWT profile grant.
	i.tokens[tok] = &tokensv1.IntrospectResponse{Active: true, Subject: userID, ClientId: userID, Audience: aud,
		TokenId: "at-" + tok, IssuedAt: timestamppb.Now(), ExpiresAt: timestamppb.New(time.Now().Add(ttl))}
	i.mu.Unlock()
	return tok
}

// Revoke makes a token inactive.
func (i *Introspector) Revoke(tok string) {
	i.mu.Lock()
	delete(i.tokens, tok)
	i.mu.Unlock()
}

// Env is a running directory service.
type Env struct {
	t       testing.TB
	Dialect db.Dialect
	Base    string // http://127.0.0.1:port
	// Handler is the service's handler, for tests that call it directly
	// (httptest) instead of over the loopback port.
	Handler http.Handler
	Intro   *Introspector
	// DB is a second handle on the service's database, for assertions
	// against the event table and projections.
	DB *db.DB
	ES *eventstore.Store
	// Logger, when set, is the service's logger from its next start
	// (Restart); otherwise its logs are discarded.
	Logger *slog.Logger

	// The seeded organization and its users.
	OrgID      string
	AdminID    string // IAM_OWNER and ORG_OWNER of OrgID
	AdminToken string
	// DNS is the resolver the service asks for domain validations
	// (GATEHOUSE_DNS_RESOLVER).
	DNS *dnstest.Server

	env  map[string]string
	stop func()
}

// Start runs the directory service on dialect d with a seeded organization.
func Start(t testing.TB, d db.Dialect) *Env {
	t.Helper()
	return StartEnv(t, d, nil)
}

// StartEnv is Start with more configuration variables (GATEHOUSE_*).
func StartEnv(t testing.TB, d db.Dialect, extra map[string]string) *Env {
	t.Helper()
	env := map[string]string{
		"GATEHOUSE_DATA_DIR":       t.TempDir(),
		"GATEHOUSE_ISSUER":         "http://localhost:8080",
		"GATEHOUSE_MASTER_KEY":     base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32)),
		"GATEHOUSE_INTERNAL_TOKEN": InternalToken,
		"GATEHOUSE_ADMIN_PASSWORD": "Bootstrap-Admin-Passw0rd",
	}
	if d == db.Postgres {
		env["GATEHOUSE_DATABASE_URL"] = testutil.PostgresDatabase(t)
		// Without a relay PostgreSQL deployments send no mail; this one
		// queues it for a port where nothing listens (the outbox retries
		// in the background), so the calls that send mail work.
		maps.Copy(env, map[string]string{"GATEHOUSE_SMTP_HOST": "127.0.0.1", "GATEHOUSE_SMTP_PORT": "9",
			"GATEHOUSE_SMTP_TLS": "none", "GATEHOUSE_SMTP_FROM": "Gatehouse <id@localhost>"})
	}
	dnsServer := dnstest.Start(t)
	env["GATEHOUSE_DNS_RESOLVER"] = dnsServer.Addr
	maps.Copy(env, extra)
	e := &Env{t: t, Dialect: d, Intro: &Introspector{tokens: map[string]*tokensv1.IntrospectResponse{}}, env: env, DNS: dnsServer}
	e.start()
	t.Cleanup(func() { e.stop() })

	st, err := db.Open(context.Background(), db.Options{URL: env["GATEHOUSE_DATABASE_URL"], DataDir: env["GATEHOUSE_DATA_DIR"],
		Service: "directory", Migrations: migrations.FS, Logger: logging.Discard(), Unlocked: true})
	if err != nil {
		t.Fatalf("open second handle: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e.DB = st
	e.ES = eventstore.New(st, nil)
	projections.RegisterAll(e.ES)
	e.OrgID, e.AdminID = e.SeedOrg("Acme Corp", "admin")
	ctx := context.Background()
	v, err := (&orgs.Queries{DB: st}).InstanceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ES.Push(ctx, "test", orgs.InstanceMemberCommand(v, e.AdminID, []string{orgs.RoleIAMOwner})); err != nil {
		t.Fatalf("seed IAM_OWNER: %v", err)
	}
	e.AdminToken = e.Intro.Mint(e.AdminID)
	return e
}

// SeedOrg creates an organization with a human owner (ORG_OWNER) directly
// through the event store, returning both ids.
func (e *Env) SeedOrg(name, ownerUserName string) (orgID, ownerID string) {
	e.t.Helper()
	ctx := context.Background()
	orgID, _, err := (&orgs.Commands{ES: e.ES, IssuerHost: "localhost"}).AddOrg(ctx, "test", name, nil)
	if err != nil {
		e.t.Fatalf("seed org: %v", err)
	}
	ownerID = e.SeedUser(orgID, ownerUserName)
	org, err := (&orgs.Queries{DB: e.DB}).Get(ctx, orgID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := (&orgs.Commands{ES: e.ES}).AddMember(ctx, "test", org, ownerID, []string{orgs.RoleOrgOwner}); err != nil {
		e.t.Fatalf("seed owner: %v", err)
	}
	return orgID, ownerID
}

// SeedUser creates an active human user in org with no roles.
func (e *Env) SeedUser(orgID, userName string) string {
	e.t.Helper()
	ctx := context.Background()
	org, err := (&orgs.Queries{DB: e.DB}).Get(ctx, orgID)
	if err != nil {
		e.t.Fatal(err)
	}
	uq := &users.Queries{DB: e.DB}
	id, _, err := (&users.Commands{ES: e.ES, Q: uq}).AddHuman(ctx, "test", org, users.HumanAdded{
		UserName: userName, FirstName: "Test", LastName: userName, DisplayName: "Test " + userName,
		Email: userName + "@example.com", PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U",
	})
	if err != nil {
		e.t.Fatalf("seed user: %v", err)
	}
	return id
}

// SeedMember grants org roles to a user.
func (e *Env) SeedMember(orgID, userID string, roles ...string) {
	e.t.Helper()
	ctx := context.Background()
	org, err := (&orgs.Queries{DB: e.DB}).Get(ctx, orgID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := (&orgs.Commands{ES: e.ES}).AddMember(ctx, "test", org, userID, roles); err != nil {
		e.t.Fatalf("seed member: %v", err)
	}
}

func (e *Env) start() {
	t := e.t
	cfg, err := config.Load(config.RoleEdge, func(k string) string { return e.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.LoadMasterKey(); err != nil {
		t.Fatal(err)
	}
	logger := e.Logger
	if logger == nil {
		logger = logging.Discard()
	}
	svc, err := service.New(context.Background(), process.Env{Config: cfg, Logger: logger}, service.Deps{Tokens: e.Intro})
	if err != nil {
		t.Fatalf("start directory: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	e.Handler = svc.Handler()
	srv := &http.Server{Handler: e.Handler, Protocols: p}
	go func() { _ = srv.Serve(ln) }()
	e.Base = "http://" + ln.Addr().String()
	e.stop = func() {
		_ = srv.Close()
		_ = svc.Close()
	}
}

// Restart stops the service and starts it again on the same storage.
func (e *Env) Restart() {
	e.stop()
	e.start()
}

// RestartUnclean restarts the service as after a crash: its SQLite data
// without the marker of a clean close (db.DB.CleanStart).
func (e *Env) RestartUnclean() {
	e.t.Helper()
	e.stop()
	if e.Dialect == db.SQLite {
		if err := os.Remove(filepath.Join(e.DataDir(), "directory.db.clean")); err != nil {
			e.t.Fatalf("remove the clean marker: %v", err)
		}
	}
	e.start()
}

// InternalToken is the internal-call credential of the test service.
const InternalToken = "internal-test-token-0123456789abcdef"

// Internal returns a client of the internal DirectoryService presenting
// token (InternalToken, another value, or "" for none) over gRPC.
func (e *Env) Internal(token string) directoryv1connect.DirectoryServiceClient {
	opts, err := rpc.InternalClientOptions(token)
	if err != nil {
		e.t.Fatal(err)
	}
	return directoryv1connect.NewDirectoryServiceClient(&http.Client{Transport: rpc.NewH2CTransport()}, e.Base, append(opts, connect.WithGRPC())...)
}

// Protocols names the RPC protocols every management test runs over.
var Protocols = []string{"connect", "grpc", "grpc-web"}

// Client returns a management client speaking protocol ("connect",
// "grpc" or "grpc-web") with token and, if not empty, x-service-orgid.
func (e *Env) Client(protocol, token, orgID string) managementv1connect.ManagementServiceClient {
	opts := []connect.ClientOption{connect.WithInterceptors(headers{token: token, org: orgID})}
	switch protocol {
	case "grpc":
		opts = append(opts, connect.WithGRPC())
	case "grpc-web":
		opts = append(opts, connect.WithGRPCWeb())
	case "connect":
		opts = append(opts, connect.WithProtoJSON())
	default:
		e.t.Fatalf("unknown protocol %q", protocol)
	}
	return managementv1connect.NewManagementServiceClient(&http.Client{Transport: rpc.NewH2CTransport()}, e.Base, opts...)
}

type headers struct{ token, org string }

func (h headers) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if h.token != "" {
			req.Header().Set("Authorization", "Bearer "+h.token)
		}
		if h.org != "" {
			req.Header().Set("x-service-orgid", h.org)
		}
		return next(ctx, req)
	}
}

func (h headers) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

func (h headers) WrapStreamingHandler(n connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return n
}

// Response is a REST response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

// Code is the google.rpc.Status code of an error body (0 when absent).
func (r *Response) Code() int {
	if c, ok := r.JSON["code"].(float64); ok {
		return int(c)
	}
	return 0
}

// Detail returns the first error detail's id and @type.
func (r *Response) Detail() (id, typ string) {
	ds, _ := r.JSON["details"].([]any)
	if len(ds) == 0 {
		return "", ""
	}
	d, _ := ds[0].(map[string]any)
	id, _ = d["id"].(string)
	typ, _ = d["@type"].(string)
	return id, typ
}

// REST sends a JSON request over HTTP/1.1. body may be nil, a string (sent
// as is) or a value marshalled to JSON.
func (e *Env) REST(method, path, token, orgID string, body any) *Response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.Base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if orgID != "" {
		req.Header.Set("x-service-orgid", orgID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: raw}
	_ = json.Unmarshal(raw, &out.JSON)
	return out
}

// Events returns the stored events of an aggregate.
func (e *Env) Events(aggregateID string) []eventstore.Event {
	e.t.Helper()
	evs, err := e.ES.Events(context.Background(), eventstore.Filter{AggregateID: aggregateID})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// EventCount returns the number of stored events.
func (e *Env) EventCount() int {
	e.t.Helper()
	var n int
	if err := e.DB.Get(context.Background(), &n, `SELECT COUNT(*) FROM events`); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// DataDir is the service's data folder (SQLite files, the embedded
// mode's mail files).
func (e *Env) DataDir() string { return e.env["GATEHOUSE_DATA_DIR"] }
