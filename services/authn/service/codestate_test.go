package service_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// factorCodePage signs alice in with her password up to the code page.
func (e *env) factorCodePage() response {
	e.t.Helper()
	r := e.submit(e.passwordPage(codeParams(), "alice"), url.Values{"password": {"Alice-Pass-1"}})
	if r.StatusCode != http.StatusOK || !strings.Contains(r.body, `name="code"`) || hidden(r, "state") == "" {
		e.t.Fatalf("want the code page with its state; got %d:\n%s", r.StatusCode, r.body)
	}
	return r
}

// hidden is a hidden field's value on page ("" when it has none).
func hidden(page response, name string) string {
	for _, h := range hiddenRE.FindAllStringSubmatch(page.body, -1) {
		if h[1] == name {
			return html.UnescapeString(h[2])
		}
	}
	return ""
}

// firstFactor is what the pending request id records of its first factor.
func (e *env) firstFactor(id string) string {
	e.t.Helper()
	var ff string
	if err := e.db.Get(context.Background(), &ff, `SELECT first_factor FROM auth_requests WHERE id = ?`, id); err != nil {
		e.t.Fatal(err)
	}
	return ff
}

// wantBackToLogin checks that r sent the browser to the login page
// without a code.
func (e *env) wantBackToLogin(r response, what string) {
	e.t.Helper()
	if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/ui/login/login?") {
		e.t.Errorf("%s: status %d Location %q; want the login page", what, r.StatusCode, r.Header.Get("Location"))
	}
}

// The code page's form carries its login's state sealed
// (login/codestate.go) instead of the pending request: it signs in only
// its own request's browser, altered it is nothing, and the links to the
// other factors carry it.
func TestCodeFormState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.SetOTP("alice-id", "123456")
	page := e.factorCodePage()
	id := hidden(page, "authRequestID")
	if ff := e.firstFactor(id); ff != "" {
		t.Errorf("the password's answer recorded the first factor %q; the code form carries it", ff)
	}

	wrong := e.submit(page, url.Values{"code": {"000000"}})
	if wrong.StatusCode != http.StatusUnauthorized || hidden(wrong, "state") == "" {
		t.Fatalf("wrong code: %d; want 401 and the code form with its state:\n%s", wrong.StatusCode, wrong.body)
	}

	// Altered, the state is nothing: the request has no first factor, so
	// the browser goes back to the login page.
	st := hidden(page, "state")
	c := "A"
	if st[len(st)/2] == 'A' {
		c = "B"
	}
	flipped := st[:len(st)/2] + c + st[len(st)/2+1:]
	for name, v := range map[string]string{"altered": flipped, "cut": st[:len(st)-4], "none": ""} {
		e.wantBackToLogin(e.submit(page, url.Values{"code": {"123456"}, "state": {v}}), name+" state")
	}

	// Another browser, at its own code page, cannot use this state: not
	// with its own request (another request's state), nor with this
	// request (another browser's).
	jar, client := e.jar, e.http
	e.newBrowser()
	other := e.factorCodePage()
	e.wantBackToLogin(e.submit(other, url.Values{"code": {"123456"}, "state": {st}}), "another request's state")
	if r := e.submit(other, url.Values{"code": {"123456"}, "state": {st}, "authRequestID": {id}}); r.StatusCode != http.StatusNotFound {
		t.Errorf("another browser's state with its request: %d; want 404", r.StatusCode)
	}
	if len(e.tok.Codes) != 0 {
		t.Fatalf("%d codes issued by refused states", len(e.tok.Codes))
	}

	// The links to the other factors carry the state, and the page they
	// open records it for the pages after it.
	e.jar, e.http = jar, client
	link := regexp.MustCompile(`href="(/ui/login/mfa\?[^"]*recovery=1[^"]*)"`).FindStringSubmatch(page.body)
	if link == nil || !strings.Contains(link[1], "state=") {
		t.Fatalf("no recovery link with the state on the code page:\n%s", page.body)
	}
	rec := e.get(html.UnescapeString(link[1]))
	if rec.StatusCode != http.StatusOK || !strings.Contains(rec.body, `name="type" value="recovery"`) {
		t.Fatalf("recovery link: %d:\n%s", rec.StatusCode, rec.body)
	}
	if !strings.Contains(e.firstFactor(id), `"userId":"alice-id"`) {
		t.Errorf("the recovery page did not record the first factor: %q", e.firstFactor(id))
	}

	// The right code signs in, once.
	e.code(e.submit(page, url.Values{"code": {"123456"}}).location(), "st-1")
	if r := e.submit(page, url.Values{"code": {"123456"}}); r.Header.Get("Location") != "" || len(e.tok.Codes) != 1 {
		t.Errorf("the code form again: %d %q, %d codes; want it refused", r.StatusCode, r.Header.Get("Location"), len(e.tok.Codes))
	}
}

// A code form's state ends with its request: posted after the request
// expired, it signs nothing in.
func TestCodeFormStateExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.SetOTP("alice-id", "123456")
	page := e.factorCodePage()
	e.advance(31 * time.Minute)
	if r := e.submit(page, url.Values{"code": {"123456"}}); r.StatusCode != http.StatusNotFound || len(e.tok.Codes) != 0 {
		t.Errorf("code form of an expired request: %d, %d codes; want 404 and none", r.StatusCode, len(e.tok.Codes))
	}
}

// A request completed by another tab while its code form was open
// answers "already completed" to that form's right code.
func TestCodeFormOfACompletedRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.SetOTP("alice-id", "123456")
	page := e.factorCodePage()
	if _, err := e.db.Exec(context.Background(), `DELETE FROM auth_requests WHERE id = ?`, hidden(page, "authRequestID")); err != nil {
		t.Fatal(err)
	}
	r := e.submit(page, url.Values{"code": {"123456"}})
	if len(e.tok.Codes) != 0 || r.StatusCode == http.StatusFound && r.location().Query().Get("code") != "" {
		t.Fatalf("code form of a completed request: %d %q; want no code", r.StatusCode, r.Header.Get("Location"))
	}
	if !strings.Contains(r.body, "already completed") && !strings.Contains(r.Header.Get("Location"), "already+completed") {
		t.Errorf("code form of a completed request: %d %q; want the already-completed answer:\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
}

// A request whose parameters make the state too long for the code page's
// links keeps it in the pending request, and the code page works as well.
func TestCodeFormOfALongRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, db.SQLite)
	e.dir.SetOTP("alice-id", "123456")
	state := strings.Repeat("s", 7000)
	page := e.follow(e.authorize(codeParams("state", state)))
	page = e.follow(e.submit(page, url.Values{"loginName": {"alice"}}))
	page = e.submit(page, url.Values{"password": {"Alice-Pass-1"}})
	if page.StatusCode != http.StatusOK || !strings.Contains(page.body, `name="code"`) {
		t.Fatalf("want the code page; got %d:\n%s", page.StatusCode, page.body)
	}
	if hidden(page, "state") != "" || !strings.Contains(e.firstFactor(hidden(page, "authRequestID")), `"userId":"alice-id"`) {
		t.Fatalf("a long request's code page: state %d bytes, first factor %q; want none, and the request's",
			len(hidden(page, "state")), e.firstFactor(hidden(page, "authRequestID")))
	}
	e.code(e.submit(page, url.Values{"code": {"123456"}}).location(), state)
}
