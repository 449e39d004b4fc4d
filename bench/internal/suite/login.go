package suite

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
)

// loginOp is one whole browser sign-in through the public HTTP interface:
// the web app's authorization request (code flow with PKCE), the login
// name page, the password page, the redirect with the code, and the code's
// exchange for tokens by the app. Each login is a new browser (a fresh
// cookie jar) on the shared keep-alive transport, so connections are
// reused and only the login's own work is measured, and takes a user that
// no other login is using (see Fixture.Users). One login is made first,
// so a flow that does not work fails the scenario at once.
func loginOp(ctx context.Context, c *http.Client, t Target, f *Fixture) (load.Op, error) {
	if len(f.Users) == 0 {
		return nil, errors.New("no users to sign in")
	}
	idle := make(chan Person, len(f.Users))
	for _, u := range f.Users {
		idle <- u
	}
	op := func(ctx context.Context) (int, error) {
		var u Person
		select {
		case u = <-idle:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		defer func() { idle <- u }()
		return login(ctx, newBrowser(t.Base, c.Transport), c, t.Base, f.Web, u)
	}
	if _, err := op(ctx); err != nil {
		return nil, fmt.Errorf("first login: %w", err)
	}
	return op, nil
}

// newBrowser is a client with its own cookies that follows redirects
// inside the issuer, as a browser does, and stops at the one that leaves
// it: the redirect to the app, where a login ends.
func newBrowser(base string, rt http.RoundTripper) *http.Client {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &http.Client{
		Transport: rt,
		Jar:       jar,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !strings.HasPrefix(req.URL.String(), base+"/") {
				return http.ErrUseLastResponse
			}
			if len(via) >= 10 {
				return errors.New("more than 10 redirects inside the issuer")
			}
			return nil
		},
	}
}

// login signs u in to web with browser b and exchanges the code with app,
// a client without the browser's cookies. It returns the last HTTP status
// and an error unless the token answer holds an ID token for u and this
// login's nonce.
func login(ctx context.Context, b, app *http.Client, base string, web Credentials, u Person) (int, error) {
	return loginWith(ctx, b, app, base, web, u, nil)
}

// loginWith is login with a step after the password page (nil: none),
// which returns the page it ends on.
func loginWith(ctx context.Context, b, app *http.Client, base string, web Credentials, u Person,
	after func(context.Context, *http.Client, page) (page, error)) (int, error) {
	state, nonce := randomHex(8), randomHex(8)
	verifier := randomHex(32) // 64 characters: a valid code_verifier
	p, err := get(ctx, b, authorizeURL(base, web.ClientID, state, nonce, s256(verifier)))
	if err != nil {
		return p.status, fmt.Errorf("authorize: %w", err)
	}
	if p, err = submit(ctx, b, p, "loginName", u.LoginName); err != nil {
		return p.status, fmt.Errorf("login name page: %w", err)
	}
	if p, err = submit(ctx, b, p, "password", u.Password); err != nil {
		return p.status, fmt.Errorf("password page: %w", err)
	}
	if after != nil {
		if p, err = after(ctx, b, p); err != nil {
			return p.status, err
		}
	}
	code, err := codeFrom(p, state)
	if err != nil {
		return p.status, fmt.Errorf("after the password: %w", err)
	}
	return exchange(ctx, app, base, web, code, verifier, u.ID, nonce)
}

// authorizeURL is the web app's authorization request.
func authorizeURL(base, clientID, state, nonce, challenge string) string {
	return base + "/oauth/v2/authorize?" + url.Values{
		"client_id": {clientID}, "redirect_uri": {RedirectURI}, "response_type": {"code"},
		"scope": {"openid profile offline_access"}, "state": {state}, "nonce": {nonce},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}.Encode()
}

// s256 is the PKCE S256 code_challenge of verifier (RFC 7636 §4.2).
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// page is where the browser ended after a request and its redirects.
type page struct {
	url    *url.URL // the last request's URL
	status int
	loc    *url.URL // the Location of a redirect out of the issuer; nil without one
	body   string
}

func get(ctx context.Context, b *http.Client, u string) (page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return page{}, err
	}
	return fetch(b, req)
}

func fetch(b *http.Client, req *http.Request) (page, error) {
	res, err := b.Do(req)
	if err != nil {
		return page{}, err
	}
	defer res.Body.Close()
	p := page{url: res.Request.URL, status: res.StatusCode}
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return p, fmt.Errorf("read %s: %w", p.url.Path, err)
	}
	p.body = string(raw)
	if res.Header.Get("Location") != "" {
		if p.loc, err = res.Location(); err != nil {
			return p, fmt.Errorf("redirect from %s: %w", p.url.Path, err)
		}
	}
	return p, nil
}

// submit fills field on page p's form and posts it with the page's hidden
// fields (authRequestID and the CSRF token among them). It fails when p is
// not the page with that field: the flow went somewhere else.
func submit(ctx context.Context, b *http.Client, p page, field, value string) (page, error) {
	action, form, err := parseForm(p.body, field)
	if err != nil {
		return p, fmt.Errorf("%s (HTTP %d): %w", pathOf(p.url), p.status, err)
	}
	target, err := p.url.Parse(action)
	if err != nil {
		return p, fmt.Errorf("form action %q: %w", action, err)
	}
	form.Set(field, value)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return p, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return fetch(b, req)
}

var (
	formRE   = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// parseForm returns the action of the first form of a login page that has
// an input named field, and the page's hidden fields.
func parseForm(body, field string) (string, url.Values, error) {
	if !strings.Contains(body, `name="`+field+`"`) {
		return "", nil, fmt.Errorf("not the page with a %s field", field)
	}
	m := formRE.FindStringSubmatch(body)
	if m == nil {
		return "", nil, errors.New("no form on the page")
	}
	form := url.Values{}
	for _, h := range hiddenRE.FindAllStringSubmatch(body, -1) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	return html.UnescapeString(m[1]), form, nil
}

// codeFrom is the code of the redirect to the app on page p, which must
// carry state.
func codeFrom(p page, state string) (string, error) {
	if p.loc == nil || !strings.HasPrefix(p.loc.String(), RedirectURI+"?") {
		return "", fmt.Errorf("%s (HTTP %d); want a redirect to %s", pathOf(p.url), p.status, RedirectURI)
	}
	q := p.loc.Query()
	if e := q.Get("error"); e != "" {
		return "", fmt.Errorf("redirect with error %s: %s", e, q.Get("error_description"))
	}
	if q.Get("code") == "" || q.Get("state") != state {
		return "", fmt.Errorf("redirect %s; want a code and state %s", p.loc.RawQuery, state)
	}
	return q.Get("code"), nil
}

// exchange redeems code at the token endpoint as the web app and checks
// the ID token is sub's, for nonce.
func exchange(ctx context.Context, app *http.Client, base string, web Credentials, code, verifier, sub, nonce string) (int, error) {
	form := url.Values{
		"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {RedirectURI}, "code_verifier": {verifier},
	}.Encode()
	req, err := formRequest(base+"/oauth/v2/token", web.basic(), form)(ctx)
	if err != nil {
		return 0, err
	}
	res, err := app.Do(req)
	if err != nil {
		return 0, fmt.Errorf("code exchange: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, fmt.Errorf("code exchange: read answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, fmt.Errorf("code exchange: HTTP %d: %.200s", res.StatusCode, body)
	}
	if err := checkIDToken(body, sub, nonce); err != nil {
		return res.StatusCode, fmt.Errorf("code exchange: %w", err)
	}
	return res.StatusCode, nil
}

// checkIDToken accepts a token answer with an access token and an ID token
// issued to sub for this login's nonce. The signature is not verified: the
// point is that this login got its tokens, and verifying would spend the
// client's CPU, not the server's.
func checkIDToken(body []byte, sub, nonce string) error {
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		TokenType    string `json:"token_type"`
		IDToken      string `json:"id_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" || tok.RefreshToken == "" || tok.TokenType != "Bearer" {
		return fmt.Errorf("not a Bearer token response with a refresh token: %.100s", body)
	}
	parts := strings.Split(tok.IDToken, ".")
	if len(parts) != 3 {
		return errors.New("no ID token in the token response")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Sub   string `json:"sub"`
		Nonce string `json:"nonce"`
	}
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		return errors.New("ID token has a malformed payload")
	}
	if claims.Sub != sub || claims.Nonce != nonce {
		return fmt.Errorf("ID token for sub %q with nonce %q; want %q and %q", claims.Sub, claims.Nonce, sub, nonce)
	}
	return nil
}

func pathOf(u *url.URL) string {
	if u == nil {
		return "no page"
	}
	return u.Path
}
