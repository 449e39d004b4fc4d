package suite

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// A login name page as the authn service renders it (the parts read).
const loginPage = `<!doctype html><html><body>
<form method="post" action="/ui/login/loginname?lang=en&amp;x=1">
<input type="hidden" name="authRequestID" value="ar_123">
<input type="hidden" name="csrf" value="a&#43;b/c=">
<input type="text" name="loginName" autofocus>
</form>
<form method="post" action="/ui/login/language"><input type="hidden" name="lang" value="de"></form>
</body></html>`

func TestParseForm(t *testing.T) {
	action, form, err := parseForm(loginPage, "loginName")
	if err != nil {
		t.Fatal(err)
	}
	if action != "/ui/login/loginname?lang=en&x=1" {
		t.Errorf("action %q", action)
	}
	if form.Get("authRequestID") != "ar_123" || form.Get("csrf") != "a+b/c=" {
		t.Errorf("hidden fields %v; want authRequestID and the unescaped csrf token", form)
	}
	if _, _, err := parseForm(loginPage, "password"); err == nil || !strings.Contains(err.Error(), "password field") {
		t.Errorf("parseForm(password) on the login name page = %v; want an error naming the field", err)
	}
	if _, _, err := parseForm(`<input name="password">`, "password"); err == nil {
		t.Error("parseForm without a form succeeded")
	}
}

func TestCodeFrom(t *testing.T) {
	at := func(loc string) page {
		u, _ := url.Parse(loc)
		here, _ := url.Parse("http://127.0.0.1:8080/ui/login/password")
		return page{url: here, status: 302, loc: u}
	}
	if code, err := codeFrom(at(RedirectURI+"?code=c1&state=s1"), "s1"); err != nil || code != "c1" {
		t.Fatalf("codeFrom = %q, %v; want c1", code, err)
	}
	for _, p := range []page{
		at(RedirectURI + "?code=c1&state=other"),
		at(RedirectURI + "?error=access_denied&state=s1"),
		at("http://127.0.0.1:9/elsewhere?code=c1&state=s1"),
		{status: 200, body: "wrong password"},
	} {
		if _, err := codeFrom(p, "s1"); err == nil {
			t.Errorf("codeFrom(%v) succeeded; want an error", p.loc)
		}
	}
}

func TestCheckIDToken(t *testing.T) {
	idToken := func(claims map[string]string) string {
		raw, _ := json.Marshal(claims)
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(raw) + ".c2ln"
	}
	answer := func(id string) []byte {
		raw, _ := json.Marshal(map[string]any{"access_token": "at", "refresh_token": "rt", "token_type": "Bearer", "id_token": id, "expires_in": 3600})
		return raw
	}
	good := idToken(map[string]string{"sub": "u1", "nonce": "n1"})
	if err := checkIDToken(answer(good), "u1", "n1"); err != nil {
		t.Fatalf("good answer: %v", err)
	}
	for name, body := range map[string][]byte{
		"no ID token":     answer(""),
		"other nonce":     answer(idToken(map[string]string{"sub": "u1", "nonce": "n2"})),
		"other user":      answer(idToken(map[string]string{"sub": "u2", "nonce": "n1"})),
		"garbled":         answer("a.%%%.c"),
		"an error":        []byte(`{"error":"invalid_grant"}`),
		"no token_type":   []byte(`{"access_token":"at","refresh_token":"rt","id_token":"` + good + `"}`),
		"no refresh":      []byte(`{"access_token":"at","token_type":"Bearer","id_token":"` + good + `"}`),
		"not JSON at all": []byte(`<html>`),
	} {
		if err := checkIDToken(body, "u1", "n1"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAuthorizeURLUsesPKCE(t *testing.T) {
	// RFC 7636 appendix B.
	if got := s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Fatalf("s256 = %s", got)
	}
	u, err := url.Parse(authorizeURL("http://127.0.0.1:1", "app", "st", "no", "ch"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Path != "/oauth/v2/authorize" || q.Get("response_type") != "code" || q.Get("code_challenge") != "ch" ||
		q.Get("code_challenge_method") != "S256" || q.Get("redirect_uri") != RedirectURI || !strings.Contains(q.Get("scope"), "openid") {
		t.Fatalf("authorize URL %s", u)
	}
}
