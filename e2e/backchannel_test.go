package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// OpenID Connect Back-Channel Logout 1.0 through the embedded server: a
// relying party's receiver on loopback verifies each logout token with
// go-jose against the server's published keys, as §2.6 asks.

const bcEvent = "http://schemas.openid.net/event/backchannel-logout"

// bcLogout is a logout token as a receiver got it.
type bcLogout struct {
	raw string
	at  time.Time
}

// bcReceiver is an app's back-channel logout endpoint. answer (nil: 200)
// answers the nth POST (from 1); it may block.
type bcReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	gate   *gateListener
	got    chan bcLogout
	mu     sync.Mutex
	n      int
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

// gateListener drops every connection at once while down: the receiver
// is down, yet its port stays taken, so nothing else can answer there.
type gateListener struct {
	net.Listener
	up atomic.Bool
}

func (l *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.up.Load() {
			return c, err
		}
		_ = c.Close()
	}
}

// newBCReceiver listens on 127.0.0.1, up unless down.
func newBCReceiver(t *testing.T, down bool, answer func(n int, w http.ResponseWriter, r *http.Request)) *bcReceiver {
	t.Helper()
	rc := &bcReceiver{t: t, got: make(chan bcLogout, 16), answer: answer}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.gate = &gateListener{Listener: rc.srv.Listener}
	rc.gate.up.Store(!down)
	rc.srv.Listener = rc.gate
	rc.srv.Start()
	t.Cleanup(rc.srv.Close)
	return rc
}

// start brings a down receiver up.
func (rc *bcReceiver) start() { rc.gate.up.Store(true) }

func (rc *bcReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		len(form) != 1 || len(form["logout_token"]) != 1 {
		rc.t.Errorf("back-channel request: %s, Content-Type %q, form %v; want a form POST of logout_token alone",
			r.Method, r.Header.Get("Content-Type"), form)
	}
	rc.mu.Lock()
	rc.n++
	n := rc.n
	rc.mu.Unlock()
	rc.got <- bcLogout{raw: form.Get("logout_token"), at: time.Now()}
	if rc.answer != nil {
		rc.answer(n, w, r)
	}
}

func (rc *bcReceiver) url() string { return rc.srv.URL + "/backchannel-logout" }

// next waits for the next logout token.
func (rc *bcReceiver) next(what string, within time.Duration) bcLogout {
	rc.t.Helper()
	select {
	case l := <-rc.got:
		return l
	case <-time.After(within):
		rc.t.Fatalf("%s: no logout token within %v", what, within)
		return bcLogout{}
	}
}

// none checks that no logout token arrived (beyond those taken).
func (rc *bcReceiver) none(what string) {
	rc.t.Helper()
	select {
	case l := <-rc.got:
		rc.t.Fatalf("%s: an unexpected logout token arrived: %s", what, l.raw)
	default:
	}
}

// bcVerify checks a logout token as a relying party must (Back-Channel
// Logout 1.0 §2.6): signed by a key of the issuer's JWKS, typ
// logout+jwt, iss, aud the client, iat and exp around now, a jti, sub and
// sid, the event, and no nonce.
func bcVerify(t *testing.T, issuer string, l bcLogout, clientID, sub, sid string) {
	t.Helper()
	jws, err := jose.ParseSignedCompact(l.raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA})
	if err != nil {
		t.Fatalf("logout token: %v", err)
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders[jose.HeaderType] != "logout+jwt" || h.KeyID == "" {
		t.Fatalf("header %+v; want typ logout+jwt and a kid", h)
	}
	res, err := http.Get(issuer + "/oauth/v2/keys")
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	err = json.NewDecoder(res.Body).Decode(&set)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %s: %d published keys", h.KeyID, len(keys))
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		t.Fatalf("logout token signature: %v", err)
	}
	var c struct {
		Iss    string                    `json:"iss"`
		Aud    any                       `json:"aud"`
		Iat    int64                     `json:"iat"`
		Exp    int64                     `json:"exp"`
		JTI    string                    `json:"jti"`
		Sub    string                    `json:"sub"`
		SID    string                    `json:"sid"`
		Events map[string]map[string]any `json:"events"`
		Nonce  *string                   `json:"nonce"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	now := l.at.Unix()
	ev, ok := c.Events[bcEvent]
	switch {
	case c.Iss != issuer:
		t.Fatalf("iss %q; want %q", c.Iss, issuer)
	case c.Aud != clientID && !(func() bool { a, _ := c.Aud.([]any); return len(a) == 1 && a[0] == clientID })():
		t.Fatalf("aud %v; want %s", c.Aud, clientID)
	case c.Iat > now+5 || c.Iat < now-60 || c.Exp <= now || c.Exp-c.Iat > 300:
		t.Fatalf("iat %d, exp %d at %d; want issued now, valid for a few minutes at most", c.Iat, c.Exp, now)
	case c.JTI == "":
		t.Fatal("no jti")
	case c.Sub != sub || c.SID != sid:
		t.Fatalf("sub %q sid %q; want %q %q", c.Sub, c.SID, sub, sid)
	case !ok || len(ev) != 0 || len(c.Events) != 1:
		t.Fatalf("events %v; want exactly {%q: {}}", c.Events, bcEvent)
	case c.Nonce != nil:
		t.Fatalf("nonce %q in a logout token", *c.Nonce)
	}
}

// bcEnv is an embedded server whose process log the tests read.
type bcEnv struct {
	*afEnv
	proc *proc
	env  map[string]string
}

// bcStart starts the embedded server; loopback says whether calls to
// loopback addresses are allowed (GATEHOUSE_IDP_ALLOW_LOOPBACK).
func bcStart(t *testing.T, loopback bool) *bcEnv {
	t.Helper()
	dir, addr := t.TempDir(), freeAddr(t)
	env := map[string]string{"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": "http://" + addr,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e"}
	if loopback {
		env["GATEHOUSE_IDP_ALLOW_LOOPBACK"] = "true"
	}
	p := startProc(t, config.RoleEdge, env)
	return &bcEnv{afEnv: afSetup(t, p.base, dir), proc: p, env: env}
}

// restart stops the server and starts it again on its data.
func (e *bcEnv) restart() {
	e.t.Helper()
	e.proc.stop(e.t)
	e.proc = startProc(e.t, config.RoleEdge, e.env)
}

// codeApp registers a web app (code flow) with back-channel URI uri ("":
// none) and returns its client configuration.
func (e *bcEnv) codeApp(name, uri string) oauth2.Config {
	e.t.Helper()
	body := map[string]any{
		"name": name, "redirectUris": []string{afRedirect}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
	}
	if uri != "" {
		body["backChannelLogoutUri"] = uri
	}
	app := e.app(body)
	return oauth2.Config{ClientID: app["clientId"].(string), ClientSecret: app["clientSecret"].(string), Endpoint: e.provider.Endpoint(),
		RedirectURL: afRedirect, Scopes: []string{oidc.ScopeOpenID}}
}

// codeSignIn signs user in to app in browser c (with the login pages, or
// by the browser's session) and returns the verified ID token.
func (e *bcEnv) codeSignIn(c *http.Client, app oauth2.Config, user, password string) afIDToken {
	e.t.Helper()
	p := afGet(e.t, c, app.AuthCodeURL("bc", oidc.Nonce("n-bc")))
	if afIs(p, "loginName") {
		p = e.password(c, p, user, password)
	}
	if p.loc == nil || p.loc.Query().Get("code") == "" {
		e.t.Fatalf("want a code redirect; got %d %v:\n%s", p.status, p.loc, p.body)
	}
	tok, err := app.Exchange(e.ctx, p.loc.Query().Get("code"))
	if err != nil {
		e.t.Fatalf("code exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := e.provider.Verifier(&oidc.Config{ClientID: app.ClientID}).Verify(e.ctx, raw)
	if err != nil {
		e.t.Fatal(err)
	}
	it := afIDToken{IDToken: idt, raw: raw, access: tok.AccessToken}
	if err := idt.Claims(&it.claims); err != nil || it.claims.SID == "" {
		e.t.Fatalf("ID token claims %+v, %v; want a sid", it.claims, err)
	}
	return it
}

// logLine waits for the server's log record msg about clientID with
// every attr (key, value as in JSON) and returns it.
func (e *bcEnv) logLine(msg, clientID string, attrs ...any) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
	lines:
		for _, l := range e.proc.log.Lines() {
			if l["msg"] != msg || l["client_id"] != clientID {
				continue
			}
			for i := 0; i+1 < len(attrs); i += 2 {
				if l[attrs[i].(string)] != attrs[i+1] {
					continue lines
				}
			}
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("no log record %q for %s %v within 30 s:\n%s", msg, clientID, attrs, e.proc.log)
	return nil
}

// The discovery document says both.
func TestBackchannelLogoutDiscovery(t *testing.T) {
	t.Parallel()
	e := bcStart(t, false)
	var doc map[string]any
	if status, body := do(t, "GET", e.base+"/.well-known/openid-configuration", nil, nil); status.StatusCode != 200 ||
		json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("discovery: %d %s", status.StatusCode, body)
	}
	if doc["backchannel_logout_supported"] != true || doc["backchannel_logout_session_supported"] != true {
		t.Fatalf("backchannel_logout_supported %v, backchannel_logout_session_supported %v; want true, true",
			doc["backchannel_logout_supported"], doc["backchannel_logout_session_supported"])
	}
}

// end_session with id_token_hint tells every app that received tokens in
// the session (a code flow app, an implicit one) at its back-channel URI;
// an app without one gets nothing; an app's session of another user in
// another browser lives on until its own logout.
func TestBackchannelLogoutEndSession(t *testing.T) {
	t.Parallel()
	e := bcStart(t, true)
	webRP, spaRP := newBCReceiver(t, false, nil), newBCReceiver(t, false, nil)
	web := e.codeApp("bc-web", webRP.url())
	plain := e.codeApp("bc-plain", "")
	spa := e.app(map[string]any{
		"name": "bc-spa", "redirectUris": []string{afImplicitCB}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_ID_TOKEN"},
		"grantTypes": []string{"OIDC_GRANT_TYPE_IMPLICIT"}, "appType": "OIDC_APP_TYPE_USER_AGENT",
		"authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "backChannelLogoutUri": spaRP.url(),
	})["clientId"].(string)

	alice := browser(t, e.base)
	it := e.codeSignIn(alice, web, "alice", afPassword)
	if p := e.codeSignIn(alice, plain, "alice", afPassword); p.claims.SID != it.claims.SID {
		t.Fatalf("second app's sid %s; want the session's %s", p.claims.SID, it.claims.SID)
	}
	q := url.Values{"client_id": {spa}, "redirect_uri": {afImplicitCB}, "response_type": {"id_token"}, "scope": {"openid"},
		"state": {"im"}, "nonce": {"n-im"}}
	if p := afGet(t, alice, e.base+"/oauth/v2/authorize?"+q.Encode()); p.loc == nil || !strings.Contains(p.loc.Fragment, "id_token=") {
		t.Fatalf("implicit sign-in by the session: %d %v:\n%s", p.status, p.loc, p.body)
	}
	bob := browser(t, e.base)
	bobs := e.codeSignIn(bob, web, "bob", afBobPass)

	start := time.Now()
	if p := e.endSession(alice, url.Values{"id_token_hint": {it.raw}}); !afLoggedOutPage(p) {
		t.Fatalf("end_session: %d %v; want the logged-out page:\n%s", p.status, p.loc, p.body)
	}
	t.Logf("end_session answered in %v", time.Since(start).Round(time.Millisecond))
	bcVerify(t, e.base, webRP.next("the web app", 10*time.Second), web.ClientID, e.users["alice"], it.claims.SID)
	bcVerify(t, e.base, spaRP.next("the implicit app", 10*time.Second), spa, e.users["alice"], it.claims.SID)
	e.logLine("back-channel logout dropped", plain.ClientID)
	e.logLine("back-channel logout delivered", web.ClientID, "status", float64(200))
	if !e.active(bobs.access) {
		t.Fatal("alice's logout ended bob's session")
	}
	webRP.none("after alice's logout")

	// bob's own logout, by its session's ID token: bob's sid, once.
	e.endSession(bob, url.Values{"id_token_hint": {bobs.raw}})
	bcVerify(t, e.base, webRP.next("bob's logout", 10*time.Second), web.ClientID, e.users["bob"], bobs.claims.SID)
	e.logLine("back-channel logout delivered", web.ClientID, "attempts", float64(1), "status", float64(200))
	webRP.none("after bob's logout")
	spaRP.none("after bob's logout")
	for _, l := range e.proc.log.Lines() {
		if s, _ := json.Marshal(l); strings.Contains(string(s), "logout_token") || strings.Contains(string(s), "backchannel-logout") {
			t.Fatalf("a log record holds the logout token or the URI: %s", s)
		}
	}
}

// A user's cut-offs end its sessions: "sign out everywhere" on the
// account page and a deactivation each tell the apps of the user's
// sessions.
func TestBackchannelLogoutUserCutOff(t *testing.T) {
	t.Parallel()
	e := bcStart(t, true)
	rp := newBCReceiver(t, false, nil)
	web := e.codeApp("bc-web", rp.url())

	// alice signs out everywhere from the account page, in another browser.
	it := e.codeSignIn(browser(t, e.base), web, "alice", afPassword)
	acc := browser(t, e.base)
	p := e.password(acc, afGet(t, acc, e.base+"/ui/account"), "alice", afPassword)
	if out := accountPost(t, acc, e.base, p, url.Values{"action": {"signout"}}); out.status != http.StatusOK {
		t.Fatalf("sign out everywhere: %d:\n%s", out.status, out.body)
	}
	bcVerify(t, e.base, rp.next("sign out everywhere", 10*time.Second), web.ClientID, e.users["alice"], it.claims.SID)

	// bob is deactivated by an administrator.
	bobs := e.codeSignIn(browser(t, e.base), web, "bob", afBobPass)
	if status, body := restJSON(t, "POST", e.base+"/management/v1/users/"+e.users["bob"]+"/_deactivate", e.admin, map[string]any{}); status != 200 {
		t.Fatalf("DeactivateUser: %d %v", status, body)
	}
	bcVerify(t, e.base, rp.next("deactivation", 10*time.Second), web.ClientID, e.users["bob"], bobs.claims.SID)
	rp.none("after the cut-offs")
}

// A receiver that answers 500 gets the logout again later, and one
// slower than the timeout (5 s) too; neither holds up end_session.
func TestBackchannelLogoutRetryAndSlowReceiver(t *testing.T) {
	t.Parallel()
	e := bcStart(t, true)
	flaky := newBCReceiver(t, false, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	slowFirst := make(chan struct{})
	slow := newBCReceiver(t, false, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			// Longer than the sender waits: it gives up and hangs up.
			<-r.Context().Done()
			close(slowFirst)
		}
	})
	flakyApp, slowApp := e.codeApp("bc-flaky", flaky.url()), e.codeApp("bc-slow", slow.url())
	c := browser(t, e.base)
	it := e.codeSignIn(c, flakyApp, "alice", afPassword)
	e.codeSignIn(c, slowApp, "alice", afPassword)

	start := time.Now()
	e.endSession(c, url.Values{"id_token_hint": {it.raw}})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("end_session took %v with a slow receiver; want at once", took)
	}
	first := flaky.next("the 500", 10*time.Second)
	second := flaky.next("the retry", 10*time.Second)
	if gap := second.at.Sub(first.at); gap < 400*time.Millisecond {
		t.Fatalf("retried %v after the 500; want a backoff (about 1 s)", gap)
	}
	for _, l := range []bcLogout{first, second} {
		bcVerify(t, e.base, l, flakyApp.ClientID, e.users["alice"], it.claims.SID)
	}
	e.logLine("back-channel logout not delivered; retrying", flakyApp.ClientID, "status", float64(500))
	e.logLine("back-channel logout delivered", flakyApp.ClientID, "attempts", float64(2))

	slow.next("the slow receiver's first try", 10*time.Second)
	select {
	case <-slowFirst:
		if took := time.Since(start); took < 4*time.Second {
			t.Fatalf("the sender hung up after %v; want the 5 s timeout", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the sender never gave up on the slow receiver")
	}
	e.logLine("back-channel logout not delivered; retrying", slowApp.ClientID, "reason", "timeout")
	bcVerify(t, e.base, slow.next("the slow receiver's retry", 10*time.Second), slowApp.ClientID, e.users["alice"], it.claims.SID)
	e.logLine("back-channel logout delivered", slowApp.ClientID, "attempts", float64(2))
}

// A receiver that is down at the logout gets it once it is up: while the
// server runs, and across a restart of the server (the outbox is in its
// database).
func TestBackchannelLogoutReceiverDown(t *testing.T) {
	t.Parallel()
	e := bcStart(t, true)
	rp, restartRP := newBCReceiver(t, true, nil), newBCReceiver(t, true, nil)
	down := e.codeApp("bc-down", rp.url())
	acrossRestart := e.codeApp("bc-restart", restartRP.url())

	c := browser(t, e.base)
	it := e.codeSignIn(c, down, "alice", afPassword)
	e.endSession(c, url.Values{"id_token_hint": {it.raw}})
	e.logLine("back-channel logout not delivered; retrying", down.ClientID, "reason", "connection failed")
	rp.none("while down")
	rp.start()
	bcVerify(t, e.base, rp.next("the receiver up again", 20*time.Second), down.ClientID, e.users["alice"], it.claims.SID)

	c = browser(t, e.base)
	it = e.codeSignIn(c, acrossRestart, "alice", afPassword)
	e.endSession(c, url.Values{"id_token_hint": {it.raw}})
	e.logLine("back-channel logout not delivered; retrying", acrossRestart.ClientID, "reason", "connection failed")
	e.restart()
	restartRP.start()
	bcVerify(t, e.base, restartRP.next("after the restart", 30*time.Second), acrossRestart.ClientID, e.users["alice"], it.claims.SID)
	e.logLine("back-channel logout delivered", acrossRestart.ClientID)
	restartRP.none("after the delivery")
}

// A URI at an address the egress policy refuses is never called:
// loopback when it is not allowed, a cloud metadata address always. The
// refusal is logged and retried (an operator may allow the address).
func TestBackchannelLogoutForbiddenAddress(t *testing.T) {
	t.Parallel()
	e := bcStart(t, false)
	rp := newBCReceiver(t, false, nil)
	loopback := e.codeApp("bc-loopback", rp.url())
	metadata := e.codeApp("bc-metadata", "http://169.254.169.254/latest/meta-data/")
	c := browser(t, e.base)
	it := e.codeSignIn(c, loopback, "alice", afPassword)
	e.codeSignIn(c, metadata, "alice", afPassword)
	e.endSession(c, url.Values{"id_token_hint": {it.raw}})
	for _, app := range []string{loopback.ClientID, metadata.ClientID} {
		e.logLine("back-channel logout not delivered; retrying", app, "reason", "address not allowed (netguard)")
	}
	// A second try is refused alike (the first retry comes within 1 s).
	e.logLine("back-channel logout not delivered; retrying", loopback.ClientID, "attempts", float64(2))
	rp.none("the loopback receiver under a policy refusing loopback")
}

// Distributed (PostgreSQL, two tokens replicas sharing the outbox): the
// directory sends the URI to the tokens processes, the logout through
// edge and authn queues the delivery, and it is sent once, by one
// replica.
func TestBackchannelLogoutDistributed(t *testing.T) {
	t.Parallel()
	d := startDistributed(t, testutil.RedisURL(t))
	second := startProc(t, config.RoleTokens, d.env(t.TempDir(), "GATEHOUSE_DIRECTORY_URL", d.directory.base))
	e := &bcEnv{afEnv: afSetup(t, d.issuer, d.directoryData), proc: d.tokens}
	rp := newBCReceiver(t, false, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	web := e.codeApp("bc-web", rp.url())
	c := browser(t, e.base)
	it := e.codeSignIn(c, web, "alice", afPassword)
	if p := e.endSession(c, url.Values{"id_token_hint": {it.raw}}); !afLoggedOutPage(p) {
		t.Fatalf("end_session: %d %v; want the logged-out page", p.status, p.loc)
	}
	rp.next("the first try", 10*time.Second)
	bcVerify(t, e.base, rp.next("the retry", 10*time.Second), web.ClientID, e.users["alice"], it.claims.SID)
	e.logLine("back-channel logout delivered", web.ClientID, "attempts", float64(2))
	rp.none("after the delivery")
	delivered := 0
	for _, p := range []*proc{d.tokens, second} {
		for _, l := range p.log.Lines() {
			if l["msg"] == "back-channel logout delivered" {
				delivered++
			}
		}
	}
	if delivered != 1 {
		t.Fatalf("%d delivery records across the replicas; want 1", delivered)
	}
}
