package cmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/cli/internal/auth"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
)

// fakeIssuer is what the CLI talks to of a Gatehouse, for machine users
// that sign in with their key files: the token, revocation and userinfo
// endpoints and the management API's GetMyOrg and ListOrgs, with the
// server's rules for a user without roles. It trusts an assertion's
// subject without checking the signature: the CLI's signing is not what
// these tests are about.
type fakeIssuer struct {
	managementv1connect.UnimplementedManagementServiceHandler
	srv *httptest.Server

	mu      sync.Mutex
	users   map[string]fakeUser
	tokens  map[string]fakeToken // by access token
	issued  int
	revoked []string
}

type fakeUser struct {
	name  string
	roles bool // an ORG_OWNER of fakeOrg, else no role anywhere
}

type fakeToken struct {
	user   string
	scopes []string
}

// The organization every fake user belongs to.
var fakeOrg = &managementv1.Org{Id: "org-1", Name: "Acme"}

func newFakeIssuer(t *testing.T) *fakeIssuer {
	f := &fakeIssuer{
		users: map[string]fakeUser{
			"u-alice": {name: "alice@acme.example", roles: true},
			"u-bob":   {name: "bob@acme.example"},
		},
		tokens: map[string]fakeToken{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/v2/token", f.token)
	mux.HandleFunc("POST /oauth/v2/revoke", f.revoke)
	mux.HandleFunc("GET /oidc/v1/userinfo", f.userinfo)
	mux.Handle(managementv1connect.NewManagementServiceHandler(f))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// issue makes an access token for user with scopes.
func (f *fakeIssuer) issue(user string, scopes ...string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issued++
	tok := fmt.Sprintf("at-%d-%s", f.issued, user)
	f.tokens[tok] = fakeToken{user: user, scopes: scopes}
	return tok
}

func (f *fakeIssuer) issuedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issued
}

func (f *fakeIssuer) revokedTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.revoked)
}

func (f *fakeIssuer) token(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	parts := strings.Split(r.FormValue("assertion"), ".")
	var claims struct {
		Sub string `json:"sub"`
	}
	if len(parts) != 3 {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	if _, ok := f.users[claims.Sub]; !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	tok := f.issue(claims.Sub, strings.Fields(r.FormValue("scope"))...)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

func (f *fakeIssuer) revoke(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := r.FormValue("token")
	f.revoked = append(f.revoked, tok)
	delete(f.tokens, tok)
}

// caller is the token's user and scopes, if the token is valid.
func (f *fakeIssuer) caller(authorization string) (string, fakeToken, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[strings.TrimPrefix(authorization, "Bearer ")]
	return t.user, t, ok
}

func (f *fakeIssuer) userinfo(w http.ResponseWriter, r *http.Request) {
	id, t, ok := f.caller(r.Header.Get("Authorization"))
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	u := f.users[id]
	claims := map[string]any{"sub": id, "name": u.name, "preferred_username": u.name}
	if slices.Contains(t.scopes, auth.ResourceOwnerScope) {
		claims[auth.ResourceOwnerScope+":id"] = fakeOrg.GetId()
		claims[auth.ResourceOwnerScope+":name"] = fakeOrg.GetName()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(claims)
}

func (f *fakeIssuer) apiCaller(ctx context.Context) (fakeUser, error) {
	call, _ := connect.CallInfoForHandlerContext(ctx)
	id, _, ok := f.caller(call.RequestHeader().Get("Authorization"))
	if !ok {
		return fakeUser{}, connect.NewError(connect.CodeUnauthenticated, errors.New("invalid token"))
	}
	return f.users[id], nil
}

func (f *fakeIssuer) GetMyOrg(ctx context.Context, _ *managementv1.GetMyOrgRequest) (*managementv1.GetMyOrgResponse, error) {
	u, err := f.apiCaller(ctx)
	if err != nil {
		return nil, err
	}
	if !u.roles {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("no role in the organization"))
	}
	return &managementv1.GetMyOrgResponse{Org: fakeOrg}, nil
}

func (f *fakeIssuer) ListOrgs(ctx context.Context, _ *managementv1.ListOrgsRequest) (*managementv1.ListOrgsResponse, error) {
	u, err := f.apiCaller(ctx)
	if err != nil {
		return nil, err
	}
	res := &managementv1.ListOrgsResponse{Details: &managementv1.ListDetails{}}
	if u.roles {
		res.Details.TotalResult, res.Result = 1, []*managementv1.Org{fakeOrg}
	}
	return res, nil
}

var (
	testKeyOnce sync.Once
	testKeyPEM  []byte
)

// keyFile writes a key file for a fake user, as Gatehouse writes them.
func keyFile(t *testing.T, userID string) string {
	t.Helper()
	testKeyOnce.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	})
	raw, _ := json.Marshal(auth.KeyFile{Type: "serviceaccount", KeyID: "key-" + userID, Key: string(testKeyPEM), UserID: userID})
	name := filepath.Join(t.TempDir(), userID+".json")
	if err := os.WriteFile(name, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// gatehouse runs the command line in-process with its own contexts file.
type gatehouse struct {
	t      *testing.T
	config string
}

func newGatehouse(t *testing.T) *gatehouse {
	return &gatehouse{t: t, config: filepath.Join(t.TempDir(), "contexts.json")}
}

// run returns stdout, stderr and the exit status.
func (g *gatehouse) run(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Main(append(args, "--config", g.config), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// ok runs a command that must succeed and returns its stdout.
func (g *gatehouse) ok(args ...string) string {
	g.t.Helper()
	out, errOut, code := g.run(args...)
	if code != 0 {
		g.t.Fatalf("gatehouse %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// json runs a command with -o json and decodes its output.
func (g *gatehouse) json(args ...string) map[string]any {
	g.t.Helper()
	out := g.ok(append(args, "-o", "json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		g.t.Fatalf("gatehouse %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// fail runs a command that must fail: nothing on stdout, one line on
// stderr with every sub-string of want. It returns that line.
func (g *gatehouse) fail(want []string, args ...string) string {
	g.t.Helper()
	out, errOut, code := g.run(args...)
	line := strings.TrimSuffix(errOut, "\n")
	ok := code != 0 && out == "" && line != "" && !strings.Contains(line, "\n")
	for _, w := range want {
		ok = ok && strings.Contains(line, w)
	}
	if !ok {
		g.t.Fatalf("gatehouse %s: exit %d, stdout %q, stderr %q; want a non-zero exit, no output and one line with %q",
			strings.Join(args, " "), code, out, errOut, want)
	}
	return line
}

// contexts reads the contexts file as JSON.
func (g *gatehouse) contexts() map[string]any {
	g.t.Helper()
	raw, err := os.ReadFile(g.config)
	if err != nil {
		g.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		g.t.Fatal(err)
	}
	return m
}
