package service_test

import (
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authntest"
)

// signedIn is a browser with alice's session and an ID token hint for it.
func signedIn(t *testing.T, d db.Dialect) (*env, string) {
	e := newEnv(t, d)
	c := e.tok.Code(e.code(e.login(codeParams(), "alice", "Alice-Pass-1"), "st-1"))
	e.tok.AddHint("alice-token", "alice-id", "web", c.GetSessionId(), false)
	e.tok.AddHint("alice-expired", "alice-id", "web", c.GetSessionId(), true)
	return e, c.GetSessionId()
}

func loggedOutPage(t *testing.T, r response) {
	t.Helper()
	if r.StatusCode != http.StatusOK || r.Header.Get("Location") != "" || !strings.Contains(r.body, "signed out") {
		t.Errorf("status %d Location %q; want the logged-out page:\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
}

// confirmPage checks that r is the logout confirmation listing accounts,
// which revokes nothing by itself (no session was revoked before it).
func confirmPage(t *testing.T, e *env, r response, accounts ...string) {
	t.Helper()
	if r.StatusCode != http.StatusOK || r.Header.Get("Location") != "" || !strings.Contains(r.body, `action="/oidc/v1/end_session"`) ||
		!strings.Contains(r.body, `name="csrf"`) {
		t.Fatalf("status %d Location %q; want the logout confirmation:\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
	for _, a := range accounts {
		if !strings.Contains(r.body, a) {
			t.Errorf("confirmation does not list %s:\n%s", a, r.body)
		}
	}
	if got := e.tok.RevokedSessions(); len(got) != 0 {
		t.Errorf("revoked %v before the confirmation", got)
	}
}

func TestEndSession(t *testing.T) {
	rows := []struct {
		name     string
		params   url.Values
		redirect string // "" = logged-out page
	}{
		{"no parameters", url.Values{}, ""},
		{"hint and registered URI", url.Values{"id_token_hint": {"alice-token"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}, "state": {"s 1"}}, "https://rp.example/bye?state=s+1&x=1"},
		{"expired hint accepted", url.Values{"id_token_hint": {"alice-expired"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}}, "https://rp.example/bye?x=1"},
		{"hint and matching client_id", url.Values{"id_token_hint": {"alice-token"}, "client_id": {"web"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}, "state": {"z"}}, "https://rp.example/bye?state=z&x=1"},
		{"client_id only", url.Values{"client_id": {"web"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}}, "https://rp.example/bye?x=1"},
		{"URI without its query", url.Values{"id_token_hint": {"alice-token"}, "post_logout_redirect_uri": {"https://rp.example/bye"}, "state": {"s"}}, ""},
		{"URI of another client", url.Values{"id_token_hint": {"alice-token"}, "post_logout_redirect_uri": {"https://spa.example/"}}, ""},
		{"URI without client", url.Values{"post_logout_redirect_uri": {"https://rp.example/bye?x=1"}}, ""},
		{"hint only", url.Values{"id_token_hint": {"alice-token"}}, ""},
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, row := range rows {
			t.Run(method+" "+row.name, func(t *testing.T) {
				e, sid := signedIn(t, db.SQLite)
				var r response
				if method == http.MethodGet {
					r = e.get("/oidc/v1/end_session?" + row.params.Encode())
				} else {
					r = e.post("/oidc/v1/end_session", row.params)
				}
				if row.params.Get("id_token_hint") == "" {
					// Without a hint the RP is unknown: the user confirms.
					confirmPage(t, e, r, "alice")
					e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")
					r = e.submit(r, nil)
				}
				if row.redirect == "" {
					loggedOutPage(t, r)
				} else if r.StatusCode != http.StatusFound || r.Header.Get("Location") != row.redirect {
					t.Errorf("status %d Location %q; want 302 to %s", r.StatusCode, r.Header.Get("Location"), row.redirect)
				}
				if !slices.Contains(e.tok.RevokedSessions(), sid) {
					t.Errorf("revoked %v; want session %s", e.tok.RevokedSessions(), sid)
				}
				wantError(t, e.authorize(codeParams("prompt", "none")), webRedirect, "login_required", "st-1", false)
			})
		}
	}
}

func TestEndSessionRefusals(t *testing.T) {
	rows := []struct {
		name   string
		params url.Values
	}{
		{"client_id is not the hint's azp", url.Values{"id_token_hint": {"alice-token"}, "client_id": {"spa"}, "post_logout_redirect_uri": {"https://spa.example/"}}},
		{"invalid hint", url.Values{"id_token_hint": {"forged"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}}},
		{"repeated state", url.Values{"state": {"a", "b"}}},
	}
	// The confirmation's POST with a token that is not the browser's.
	t.Run("confirmation with a wrong CSRF token", func(t *testing.T) {
		e, _ := signedIn(t, db.SQLite)
		r := e.post("/oidc/v1/end_session", url.Values{"csrf": {"forged"}, "client_id": {"web"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}})
		if r.StatusCode != http.StatusForbidden || r.Header.Get("Location") != "" {
			t.Errorf("status %d Location %q; want a 403 error page", r.StatusCode, r.Header.Get("Location"))
		}
		if got := e.tok.RevokedSessions(); len(got) != 0 {
			t.Errorf("revoked %v; a refused logout changes nothing", got)
		}
		e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")
	})
	// A GET never confirms, even carrying the right token.
	t.Run("GET with the CSRF token", func(t *testing.T) {
		e, _ := signedIn(t, db.SQLite)
		page := e.get("/oidc/v1/end_session")
		csrf := hiddenRE.FindStringSubmatch(page.body)
		confirmPage(t, e, e.get("/oidc/v1/end_session?csrf="+url.QueryEscape(csrf[2])))
		e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")
	})
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			e, _ := signedIn(t, db.SQLite)
			r := e.get("/oidc/v1/end_session?" + row.params.Encode())
			if r.StatusCode != http.StatusBadRequest || r.Header.Get("Location") != "" || !strings.Contains(r.body, "invalid_request") {
				t.Errorf("status %d Location %q; want a 400 error page", r.StatusCode, r.Header.Get("Location"))
			}
			if got := e.tok.RevokedSessions(); len(got) != 0 {
				t.Errorf("revoked %v; a refused logout changes nothing", got)
			}
			e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")
		})
	}
}

func TestEndSessionEndsEveryUserWithoutHint(t *testing.T) {
	authntest.Run(t, func(t *testing.T, d db.Dialect) {
		e, alice := signedIn(t, d)
		page := e.follow(e.authorize(codeParams("prompt", "select_account")))
		other := e.follow(e.get("/ui/login/login?authRequestID=" + url.QueryEscape(hiddenRE.FindStringSubmatch(page.body)[2]) + "&other=1"))
		bob := e.tok.Code(e.code(e.password(e.follow(e.submit(other, url.Values{"loginName": {"bob"}})), "Bob-Pass-2"), "st-1")).GetSessionId()

		// With a hint only alice's session ends; bob stays signed in.
		loggedOutPage(t, e.get("/oidc/v1/end_session?id_token_hint=alice-token"))
		if got := e.tok.RevokedSessions(); !slices.Equal(got, []string{alice}) {
			t.Errorf("revoked %v; want only alice's %s", got, alice)
		}
		if c := e.tok.Code(e.code(e.authorize(codeParams("prompt", "none")).location(), "st-1")); c.GetUserId() != "bob-id" {
			t.Errorf("after alice's logout: code for %s; want bob", c.GetUserId())
		}
		page = e.get("/oidc/v1/end_session")
		if !strings.Contains(page.body, `action="/oidc/v1/end_session"`) || !strings.Contains(page.body, "bob") || len(e.tok.RevokedSessions()) != 1 {
			t.Fatalf("want the logout confirmation listing bob, before any revocation:\n%s", page.body)
		}
		if strings.Contains(page.body, "alice") {
			t.Errorf("confirmation lists alice, who is signed out:\n%s", page.body)
		}
		loggedOutPage(t, e.submit(page, nil))
		if got := e.tok.RevokedSessions(); !slices.Contains(got, bob) {
			t.Errorf("revoked %v; want bob's %s too", got, bob)
		}
		wantError(t, e.authorize(codeParams("prompt", "none")), webRedirect, "login_required", "st-1", false)
	})
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, db.SQLite)
	for _, path := range []string{"/oauth/v2/authorize", "/oidc/v1/end_session"} {
		req, _ := http.NewRequest(http.MethodPut, e.srv.URL+path, nil)
		if r := e.do(req); r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("PUT %s: status %d; want 405", path, r.StatusCode)
		}
	}
}

func TestLoggedOutPageLanguage(t *testing.T) {
	e, _ := signedIn(t, db.SQLite)
	r := e.get("/oidc/v1/end_session?ui_locales=de")
	if !strings.Contains(r.body, `<html lang="de">`) || !strings.Contains(r.body, "Abmelden?") {
		t.Errorf("status %d; want the German confirmation:\n%s", r.StatusCode, r.body)
	}
	confirmPage(t, e, r, "alice")
	// ui_locales travels through the form.
	r = e.submit(r, nil)
	if r.StatusCode != http.StatusOK || !strings.Contains(r.body, `<html lang="de">`) || !strings.Contains(r.body, "Sie sind abgemeldet") {
		t.Errorf("status %d; want the German logged-out page:\n%s", r.StatusCode, r.body)
	}

	e, _ = signedIn(t, db.SQLite)
	r = e.get("/oidc/v1/end_session", "Accept-Language", "de-DE")
	if !strings.Contains(r.body, "Möchten Sie sich von Gatehouse abmelden?") {
		t.Errorf("Accept-Language de: want the German confirmation:\n%s", r.body)
	}
	r = e.submit(r, nil, "Accept-Language", "de-DE")
	if !strings.Contains(r.body, "Sie sind abgemeldet") {
		t.Errorf("Accept-Language de: want the German logged-out page:\n%s", r.body)
	}
}

// TestEndSessionWithoutSessions: a browser that holds no session has
// nothing to confirm; it gets the result at once.
func TestEndSessionWithoutSessions(t *testing.T) {
	e := newEnv(t, db.SQLite)
	loggedOutPage(t, e.get("/oidc/v1/end_session"))
	r := e.get("/oidc/v1/end_session?" + url.Values{"client_id": {"web"}, "post_logout_redirect_uri": {"https://rp.example/bye?x=1"}, "state": {"s"}}.Encode())
	if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://rp.example/bye?state=s&x=1" {
		t.Errorf("status %d Location %q; want 302 to the registered URI", r.StatusCode, r.Header.Get("Location"))
	}
}

// TestEndSessionHintOfAnotherBrowserNeedsConfirmation: a valid hint whose
// session is not this browser's (a link opened elsewhere, a cross-site
// request without the cookie) ends nothing until the user confirms; a
// hint that expired over a day ago is refused.
func TestEndSessionHintOfAnotherBrowserNeedsConfirmation(t *testing.T) {
	e, sid := signedIn(t, db.SQLite)
	jar, _ := cookiejar.New(nil)
	e.jar, e.http.Jar = jar, jar // another browser, no cookie
	r := e.get("/oidc/v1/end_session?" + url.Values{"id_token_hint": {"alice-token"}}.Encode())
	confirmPage(t, e, r)
	loggedOutPage(t, e.submit(r, nil))
	if !slices.Contains(e.tok.RevokedSessions(), sid) {
		t.Errorf("revoked %v after the confirmation; want session %s", e.tok.RevokedSessions(), sid)
	}

	e.tok.Hints["stale"] = authntest.Hint{Resp: &tokensv1.VerifyIDTokenHintResponse{Subject: "alice-id", ClientId: "web", SessionId: sid,
		ExpiresAt: timestamppb.New(time.Now().Add(-48 * time.Hour))}, Expired: true}
	if r := e.get("/oidc/v1/end_session?" + url.Values{"id_token_hint": {"stale"}}.Encode()); r.StatusCode != http.StatusBadRequest {
		t.Errorf("a hint expired two days ago: status %d; want 400", r.StatusCode)
	}
}
