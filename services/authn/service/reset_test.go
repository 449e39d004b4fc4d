package service_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

var resetLinkOnPageRE = regexp.MustCompile(`href="(/ui/login/password/reset\?authRequestID=[^"]+)"`)

// The "Forgot password?" pages: the link and the page follow the login
// policy; the answer is the same for any name; the link's page needs its
// code and the browser's CSRF token, and sets the password once under
// the policy.
func TestPasswordResetPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	page := e.follow(e.authorize(codeParams()))
	m := resetLinkOnPageRE.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no Forgot password? link on the first page:\n%s", page.body)
	}
	reset := e.get(html.UnescapeString(m[1]))
	if reset.StatusCode != http.StatusOK || !strings.Contains(reset.body, `name="loginName"`) {
		t.Fatalf("the reset page: %d:\n%s", reset.StatusCode, reset.body)
	}
	var answers []string
	for _, name := range []string{"alice", "nobody"} {
		r := e.submit(reset, url.Values{"loginName": {name}})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("reset for %s: %d", name, r.StatusCode)
		}
		answers = append(answers, hiddenRE.ReplaceAllString(r.body, ""))
	}
	if answers[0] != answers[1] || !slices.Equal(e.dir.ResetsRequested, []string{"alice", "nobody"}) {
		t.Fatalf("answers differ by name, or requests %v", e.dir.ResetsRequested)
	}
	if r := e.post("/ui/login/password/reset", url.Values{"authRequestID": {hiddenRE.FindStringSubmatch(reset.body)[2]}, "loginName": {"alice"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a reset without the CSRF token: %d", r.StatusCode)
	}

	// The link's page.
	e.dir.ResetCodes = map[string]string{"alice-id": "the-code"}
	if r := e.get("/ui/login/password/new?userID=alice-id&code=wrong"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a wrong code: %d", r.StatusCode)
	}
	np := e.get("/ui/login/password/new?userID=alice-id&code=the-code")
	if np.StatusCode != http.StatusOK || !strings.Contains(np.body, `name="newPassword"`) {
		t.Fatalf("the link's page: %d:\n%s", np.StatusCode, np.body)
	}
	if r := e.post("/ui/login/password/new", url.Values{"userID": {"alice-id"}, "code": {"the-code"}, "newPassword": {"Alice-N3w-1"},
		"confirmPassword": {"Alice-N3w-1"}}); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a new password without the CSRF token: %d", r.StatusCode)
	}
	if r := e.submit(np, url.Values{"newPassword": {"weak"}, "confirmPassword": {"weak"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a password against the policy: %d", r.StatusCode)
	}
	if r := e.submit(np, url.Values{"newPassword": {"Alice-N3w-1"}, "confirmPassword": {"Alice-N3w-2"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a mismatched confirmation: %d", r.StatusCode)
	}
	done := e.submit(np, url.Values{"newPassword": {"Alice-N3w-1"}, "confirmPassword": {"Alice-N3w-1"}})
	if done.StatusCode != http.StatusOK || !strings.Contains(done.body, "Your password was changed") || e.dir.Users["alice-id"].Password != "Alice-N3w-1" {
		t.Fatalf("the new password: %d:\n%s", done.StatusCode, done.body)
	}
	if r := e.submit(np, url.Values{"newPassword": {"Alice-N3w-3"}, "confirmPassword": {"Alice-N3w-3"}}); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("the code a second time: %d", r.StatusCode)
	}

	// hidePasswordReset: no link, no page.
	e.dir.Orgs["org1"].LoginPolicy.HidePasswordReset = true
	page = e.follow(e.authorize(codeParams()))
	if resetLinkOnPageRE.MatchString(page.body) {
		t.Fatal("the link shows although the policy hides it")
	}
	id := hiddenRE.FindStringSubmatch(page.body)[2]
	if r := e.get("/ui/login/password/reset?authRequestID=" + url.QueryEscape(id)); r.StatusCode != http.StatusNotFound {
		t.Fatalf("the hidden reset page: %d", r.StatusCode)
	}
}
