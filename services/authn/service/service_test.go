package service_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
	"github.com/gatehouse-id/gatehouse/services/authn/service"
)

// The fakes serve the parts of the internal APIs authn calls; the rest
// answers Unimplemented (promoted from one level deeper).
type (
	dirUnimplemented struct {
		directoryv1connect.UnimplementedDirectoryServiceHandler
	}
	tokensUnimplemented struct {
		tokensv1connect.UnimplementedTokenServiceHandler
	}
	dirServer struct {
		*authntest.Directory
		dirUnimplemented
	}
	tokensServer struct {
		*authntest.Tokens
		tokensUnimplemented
	}
)

// TestStandaloneOverConnect runs service.New as the authn process does:
// the directory and tokens reached over Connect (h2c) with the internal
// credential, SQLite storage, an https issuer (Secure cookie).
func TestStandaloneOverConnect(t *testing.T) {
	const token = "internal-token-internal-token-internal-token"
	e := newEnv(t, "sqlite") // reuse the fixtures; its handler is not used
	serve := func(path string, h http.Handler) *url.URL {
		mux := http.NewServeMux()
		mux.Handle(path, h)
		srv := httptest.NewUnstartedServer(mux)
		srv.EnableHTTP2 = true
		p := new(http.Protocols)
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = p
		srv.Start()
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		return u
	}
	opts, err := rpc.InternalHandlerOptions(token)
	if err != nil {
		t.Fatal(err)
	}
	dirURL := serve(directoryv1connect.NewDirectoryServiceHandler(dirServer{Directory: e.dir}, opts...))
	tokURL := serve(tokensv1connect.NewTokenServiceHandler(tokensServer{Tokens: e.tok}, opts...))
	vars := map[string]string{
		"GATEHOUSE_DATA_DIR":       t.TempDir(),
		"GATEHOUSE_ISSUER":         "https://id.example",
		"GATEHOUSE_DIRECTORY_URL":  dirURL.String(),
		"GATEHOUSE_TOKENS_URL":     tokURL.String(),
		"GATEHOUSE_INTERNAL_TOKEN": token,
	}
	cfg, err := config.Load(config.RoleAuthn, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(context.Background(), process.Env{Config: cfg, Logger: logging.Discard()}, service.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	for name, check := range svc.Checks() {
		if err := check(context.Background()); err != nil {
			t.Errorf("check %s: %v", name, err)
		}
	}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	e.srv = srv // drive the real service with the env's browser
	e.newBrowser()

	r := e.authorize(codeParams())
	var secure bool
	for _, c := range r.Cookies() {
		if c.Name == "__Host-gatehouse_ua" {
			secure = c.Secure
		}
	}
	if !secure {
		t.Errorf("cookies %v; want a Secure user-agent cookie for an https issuer", r.Cookies())
	}
	// The browser would not send a Secure cookie over http; the test's jar
	// is told the origin is https by copying the cookie.
	u, _ := url.Parse(srv.URL)
	e.jar.SetCookies(u, func() []*http.Cookie {
		cs := r.Cookies()
		for _, c := range cs {
			c.Secure = false
		}
		return cs
	}())
	page := e.follow(r)
	page = e.follow(e.submit(page, url.Values{"loginName": {"alice"}}))
	c := e.tok.Code(e.code(e.password(page, "Alice-Pass-1"), "st-1"))
	if c.GetUserId() != "alice-id" || len(c.GetAmr()) != 1 {
		t.Errorf("code over Connect: %v", c)
	}
	e.tok.AddHint("alice-token", "alice-id", "web", c.GetSessionId(), false)
	r = e.get("/oidc/v1/end_session?id_token_hint=alice-token&post_logout_redirect_uri=" + url.QueryEscape("https://rp.example/bye?x=1"))
	if !strings.HasPrefix(r.Header.Get("Location"), "https://rp.example/bye") {
		t.Errorf("end_session: status %d Location %q", r.StatusCode, r.Header.Get("Location"))
	}
	if got := e.tok.RevokedSessions(); len(got) != 1 || got[0] != c.GetSessionId() {
		t.Errorf("revoked %v; want %s", got, c.GetSessionId())
	}
}
