package login

import (
	"crypto/subtle"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// The account page: the signed-in user's own profile and credentials,
// for the browser's session (same look, languages and CSRF token as the
// login pages). Without a session it signs the user in first (an
// authorize.AccountRequest, which ends here rather than at an
// application). Removing a factor, adding a passkey and new recovery
// codes need an authentication of the last FreshAuth: an older session
// signs in again first.

// Account paths.
const (
	PathAccount         = authorize.PathAccount
	PathAccountPassword = "/ui/account/password"
	PathAccountTOTP     = "/ui/account/totp"
	PathAccountKey      = "/ui/account/key"
)

// FreshAuth is how recent the session's authentication must be for a
// sensitive change.
const FreshAuth = 5 * time.Minute

// DefaultAccountClient is the built-in application whose organization
// the account page signs in to when neither the browser's session nor
// ?org= names one (the bootstrap organization of the gatehouse CLI).
const DefaultAccountClient = "gatehouse-cli"

// accountView is what the account page shows.
type accountView struct {
	DisplayName, Email string
	Factors            []factorView
	HasOTP             bool
	WebAuthn           bool
	RecoveryLeft       int
	Links              []linkView
	Sessions           []sessionView
}

type factorView struct{ ID, Type, Name, Added string }
type linkView struct{ IdPID, IdPName, UserName string }
type sessionView struct {
	AuthTime, LastActive string
	Current              bool
}

// accountNotices are the messages ?done= may show after a change.
var accountNotices = map[string]string{
	"password": "account.done.password", "totp": "account.done.factor", "u2f": "account.done.factor",
	"passwordless": "account.done.factor", "removed": "account.done.removed", "fresh": "account.fresh",
}

// acct is one request of the account page: the browser, its session and
// user, the posted form (after the CSRF check).
type acct struct {
	ua   session.UserAgent
	s    session.Session
	u    *directoryv1.User
	form map[string]string
	lang string
}

func (a *acct) page(title string) *page {
	return &page{Lang: a.lang, Title: title, CSRF: a.ua.CSRFToken, LoginName: a.u.GetPreferredLoginName(),
		Errors: map[string]string{}, Form: map[string]string{}}
}

// account loads the account page's request: the browser's session (the
// one of ?user= among several, else the most recent) and its user. With
// no valid session it sends the browser to sign in and returns nil; on
// failure it has written the error page.
func (p *Pages) account(w http.ResponseWriter, r *http.Request, fields ...string) *acct {
	lang := Language([]string{r.URL.Query().Get("ui_locales")}, r.Header.Get("Accept-Language"))
	ctx := r.Context()
	var form map[string]string
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			p.messagePage(w, r, lang, http.StatusBadRequest, "err.request")
			return nil
		}
		form = map[string]string{}
		for _, k := range append(fields, "csrf", "user") {
			form[k] = r.PostForm.Get(k)
		}
	}
	ua, err := p.Browsers.Ensure(ctx, w, r)
	if err != nil {
		p.internal(w, r, lang, err)
		return nil
	}
	if form != nil && subtle.ConstantTimeCompare([]byte(form["csrf"]), []byte(ua.CSRFToken)) != 1 {
		p.messagePage(w, r, lang, http.StatusForbidden, "err.csrf")
		return nil
	}
	live, err := p.Flow.Sessions(ctx, ua.ID)
	if err != nil {
		p.internal(w, r, lang, err)
		return nil
	}
	want := r.URL.Query().Get("user")
	if form != nil && form["user"] != "" {
		want = form["user"]
	}
	for _, s := range live {
		if want != "" && s.UserID != want {
			continue
		}
		ok, err := p.Flow.SessionValid(ctx, s)
		if err != nil {
			p.internal(w, r, lang, err)
			return nil
		}
		if !ok {
			continue
		}
		res, err := p.Directory.GetUser(ctx, &directoryv1.GetUserRequest{UserId: s.UserID})
		if err != nil {
			p.internal(w, r, lang, err)
			return nil
		}
		if pl := res.GetUser().GetPreferredLanguage(); r.URL.Query().Get("ui_locales") == "" && pl != "" {
			lang = Language([]string{pl}, r.Header.Get("Accept-Language"))
		}
		return &acct{ua: ua, s: s, u: res.GetUser(), form: form, lang: lang}
	}
	org := r.URL.Query().Get("org")
	if org == "" && len(live) > 0 {
		org = live[0].OrgID
	}
	p.accountSignIn(w, r, ua, org, "", lang)
	return nil
}

// accountSignIn parks the account page's sign-in to org (the default
// organization when "") and sends the browser to the login page; a
// loginHint asks the user to sign in again (a fresh authentication).
func (p *Pages) accountSignIn(w http.ResponseWriter, r *http.Request, ua session.UserAgent, org, loginHint, lang string) {
	ctx := r.Context()
	if org == "" {
		c, err := p.Directory.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: DefaultAccountClient})
		if connect.CodeOf(err) == connect.CodeNotFound {
			p.messagePage(w, r, lang, http.StatusNotFound, "account.err.org")
			return
		}
		if err != nil {
			p.internal(w, r, lang, err)
			return
		}
		org = c.GetClient().GetOrgId()
	} else if _, err := p.org(ctx, org); connect.CodeOf(err) == connect.CodeNotFound {
		p.messagePage(w, r, lang, http.StatusNotFound, "err.request")
		return
	} else if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	req := authorize.AccountRequest(org, p.Flow.Validator.Issuer, loginHint, []string{lang}, p.Now())
	to, err := p.Flow.Park(ctx, req, ua.ID)
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// fresh reports whether a's session authenticated within FreshAuth; if
// not, it sends the user to sign in again and returns false.
func (p *Pages) fresh(w http.ResponseWriter, r *http.Request, a *acct) bool {
	if p.Now().Sub(a.s.AuthTime) <= FreshAuth {
		return true
	}
	p.accountSignIn(w, r, a.ua, a.s.OrgID, a.s.LoginName, a.lang)
	return false
}

// accountPage shows the account.
func (p *Pages) accountPage(w http.ResponseWriter, r *http.Request) {
	a := p.account(w, r)
	if a == nil {
		return
	}
	p.renderAccount(w, r, a, http.StatusOK, accountNotices[r.URL.Query().Get("done")], "")
}

func (p *Pages) renderAccount(w http.ResponseWriter, r *http.Request, a *acct, status int, notice, errKey string) {
	ctx := r.Context()
	res, err := p.Directory.GetAccount(ctx, &directoryv1.GetAccountRequest{UserId: a.u.GetId()})
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	v := &accountView{DisplayName: a.u.GetDisplayName(), Email: a.u.GetEmail(), WebAuthn: p.WebAuthn, RecoveryLeft: int(res.GetRecoveryCodesLeft())}
	for _, f := range res.GetFactors() {
		if !f.GetReady() {
			continue
		}
		v.HasOTP = v.HasOTP || f.GetType() == "otp"
		v.Factors = append(v.Factors, factorView{ID: f.GetId(), Type: f.GetType(), Name: f.GetName(), Added: stamp(f.GetCreationDate().AsTime())})
	}
	for _, l := range res.GetLinks() {
		v.Links = append(v.Links, linkView{IdPID: l.GetIdpId(), IdPName: l.GetIdpName(), UserName: l.GetExternalUserName()})
	}
	sessions, err := p.Store.UserSessions(ctx, a.u.GetId(), p.Now())
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	nb := a.u.GetSessionsNotBefore()
	for _, s := range sessions {
		if nb != nil && !s.AuthTime.After(nb.AsTime()) {
			continue // ended by a password reset or a sign-out everywhere
		}
		v.Sessions = append(v.Sessions, sessionView{AuthTime: stamp(s.AuthTime), LastActive: stamp(s.LastActive), Current: s.ID == a.s.ID})
	}
	pg := a.page("account.title")
	pg.Account, pg.Wide = v, true
	pg.Form["notice"] = notice
	if errKey != "" {
		pg.Error = translate(a.lang, errKey)
	}
	p.tmpl.render(w, p.Logger, status, "account", pg)
}

// stamp is a time as the account page shows it.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// accountBack is the account page after a change, with its notice.
func accountBack(w http.ResponseWriter, r *http.Request, done string) {
	http.Redirect(w, r, PathAccount+"?done="+done, http.StatusSeeOther)
}

// accountSubmit runs one of the page's buttons: remove a factor, new
// recovery codes, unlink an identity, sign out everywhere.
func (p *Pages) accountSubmit(w http.ResponseWriter, r *http.Request) {
	a := p.account(w, r, "action", "type", "id", "idp")
	if a == nil {
		return
	}
	ctx := r.Context()
	uid := a.u.GetId()
	switch a.form["action"] {
	case "remove":
		if !p.fresh(w, r, a) {
			return
		}
		_, err := p.Directory.RemoveAccountFactor(ctx, &directoryv1.RemoveAccountFactorRequest{UserId: uid, Type: a.form["type"], Id: a.form["id"]})
		if c := connect.CodeOf(err); c == connect.CodeNotFound || c == connect.CodeInvalidArgument {
			p.renderAccount(w, r, a, http.StatusNotFound, "", "account.err.gone")
			return
		} else if err != nil {
			p.internal(w, r, a.lang, err)
			return
		}
		accountBack(w, r, "removed")
	case "recovery":
		if !p.fresh(w, r, a) {
			return
		}
		p.showCodes(w, r, a)
	case "unlink":
		// Like every removed credential, the link takes the user's
		// sessions with it: the user signs in again.
		_, err := p.Directory.UnlinkAccount(ctx, &directoryv1.UnlinkAccountRequest{UserId: uid, IdpId: a.form["idp"]})
		if connect.CodeOf(err) == connect.CodeNotFound {
			p.renderAccount(w, r, a, http.StatusNotFound, "", "account.err.gone")
			return
		} else if err != nil {
			p.internal(w, r, a.lang, err)
			return
		}
		http.Redirect(w, r, PathAccount, http.StatusSeeOther)
	case "signout":
		if _, err := p.Directory.EndUserSessions(ctx, &directoryv1.EndUserSessionsRequest{UserId: uid}); err != nil {
			p.internal(w, r, a.lang, err)
			return
		}
		if err := p.Store.Delete(ctx, a.s.ID); err != nil {
			p.internal(w, r, a.lang, err)
			return
		}
		p.LoggedOut(w, r, []string{a.lang})
	default:
		p.messagePage(w, r, a.lang, http.StatusBadRequest, "err.request")
	}
}

// showCodes gives the user new recovery codes, shown once.
func (p *Pages) showCodes(w http.ResponseWriter, r *http.Request, a *acct) {
	codes, err := p.Directory.GenerateRecoveryCodes(r.Context(), &directoryv1.GenerateRecoveryCodesRequest{UserId: a.u.GetId()})
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	pg := a.page("mfa.codes.title")
	pg.Policy = codes.GetCodes()
	pg.Form["back"] = PathAccount
	p.tmpl.render(w, p.Logger, http.StatusOK, "mfacodes", pg)
}

// codesAfterEnrolling shows new recovery codes when the user has none
// (the first factor), else returns to the account page.
func (p *Pages) codesAfterEnrolling(w http.ResponseWriter, r *http.Request, a *acct, done string) {
	res, err := p.Directory.GetAccount(r.Context(), &directoryv1.GetAccountRequest{UserId: a.u.GetId()})
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	if res.GetRecoveryCodesLeft() == 0 {
		p.showCodes(w, r, a)
		return
	}
	accountBack(w, r, done)
}

// accountPasswordPage asks for the current and a new password.
func (p *Pages) accountPasswordPage(w http.ResponseWriter, r *http.Request) {
	a := p.account(w, r)
	if a == nil {
		return
	}
	p.renderAccountPassword(w, r, a, http.StatusOK, nil)
}

func (p *Pages) renderAccountPassword(w http.ResponseWriter, r *http.Request, a *acct, status int, pg *page) {
	if pg == nil {
		pg = a.page("change.title")
	}
	org, err := p.org(r.Context(), a.u.GetOrgId())
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	pg.Policy = policyLines(a.lang, org.GetPasswordPolicy())
	pg.Form["action"], pg.Form["intro"] = PathAccountPassword, "account.password.intro"
	p.tmpl.render(w, p.Logger, status, "change", pg)
}

// accountPasswordSubmit changes the password (the directory checks the
// current one under the failed-password limits, and the policy).
func (p *Pages) accountPasswordSubmit(w http.ResponseWriter, r *http.Request) {
	a := p.account(w, r, "currentPassword", "newPassword", "confirmPassword")
	if a == nil {
		return
	}
	ctx := r.Context()
	pg := a.page("change.title")
	org, err := p.org(ctx, a.u.GetOrgId())
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	if a.form["currentPassword"] == "" {
		pg.Errors["currentPassword"] = translate(a.lang, "err.required")
	}
	if key := checkNewPassword(a.form["newPassword"], a.form["confirmPassword"], org.GetPasswordPolicy()); key != "" {
		field := "newPassword"
		if key == "err.mismatch" {
			field = "confirmPassword"
		}
		pg.Errors[field] = translate(a.lang, key)
	}
	if len(pg.Errors) > 0 {
		p.renderAccountPassword(w, r, a, http.StatusBadRequest, pg)
		return
	}
	_, err = p.Directory.ChangePassword(ctx, &directoryv1.ChangePasswordRequest{UserId: a.u.GetId(),
		CurrentPassword: a.form["currentPassword"], NewPassword: a.form["newPassword"], ClientAddress: clientAddress(r)})
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodeResourceExhausted:
		pg.Errors["currentPassword"] = translate(a.lang, "account.err.current")
		p.renderAccountPassword(w, r, a, http.StatusUnauthorized, pg)
		return
	case connect.CodeInvalidArgument:
		pg.Errors["newPassword"] = translate(a.lang, "err.policy")
		p.renderAccountPassword(w, r, a, http.StatusBadRequest, pg)
		return
	}
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	accountBack(w, r, "password")
}

// toAccount answers a GET of a page that only a POST starts (adding a
// factor changes state): back to the account page, where its button is.
func toAccount(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, PathAccount, http.StatusSeeOther)
}

func (p *Pages) renderAccountTOTP(w http.ResponseWriter, r *http.Request, a *acct, status int, codeErr string) {
	reg, err := p.Directory.StartTOTP(r.Context(), &directoryv1.StartTOTPRequest{UserId: a.u.GetId()})
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		accountBack(w, r, "totp")
		return
	}
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	svg, err := qrSVG(reg.GetUri(), translate(a.lang, "mfa.init.qr"))
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	pg := a.page("account.addOTP")
	pg.QR, pg.OTPURI, pg.Secret = svg, template.URL(reg.GetUri()), groupSecret(reg.GetSecret()) // #nosec G203 -- otpauth:// built by the directory
	pg.Form["action"], pg.Form["intro"] = PathAccountTOTP, "account.totp.intro"
	if codeErr != "" {
		pg.Errors["code"] = codeErr
	}
	p.tmpl.render(w, p.Logger, status, "mfainit", pg)
}

// accountTOTPSubmit starts adding an authenticator app (start=1: its QR
// code and secret), or completes it with one of its codes.
func (p *Pages) accountTOTPSubmit(w http.ResponseWriter, r *http.Request) {
	a := p.account(w, r, "code", "start")
	if a == nil {
		return
	}
	if a.form["start"] != "" {
		p.renderAccountTOTP(w, r, a, http.StatusOK, "")
		return
	}
	code := strings.TrimSpace(a.form["code"])
	if code == "" || len(code) > 64 {
		p.renderAccountTOTP(w, r, a, http.StatusBadRequest, translate(a.lang, "err.required"))
		return
	}
	_, err := p.Directory.VerifyTOTP(r.Context(), &directoryv1.VerifyTOTPRequest{UserId: a.u.GetId(), Code: code})
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		p.renderAccountTOTP(w, r, a, http.StatusUnauthorized, translate(a.lang, "err.code"))
		return
	case connect.CodeAborted, connect.CodeNotFound:
		// The registration expired or was replaced: a fresh one.
		p.renderAccountTOTP(w, r, a, http.StatusConflict, translate(a.lang, "err.code"))
		return
	}
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	p.codesAfterEnrolling(w, r, a, "totp")
}

// keyType is the ?type= / type field of the key pages.
func keyType(t string) (string, error) {
	if t != "u2f" && t != "passwordless" {
		return "", errors.New("type must be u2f or passwordless")
	}
	return t, nil
}

func (p *Pages) renderAccountKey(w http.ResponseWriter, r *http.Request, a *acct, typ string, status int, errKey, name string) {
	if !p.WebAuthn {
		p.renderAccount(w, r, a, http.StatusConflict, "", "err.webauthnUnavailable")
		return
	}
	res, err := p.Directory.StartWebAuthnRegistration(r.Context(), &directoryv1.StartWebAuthnRegistrationRequest{UserId: a.u.GetId(), Type: typ})
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	title, intro, button := "account.addKey", "account.key.intro", "mfa.init.key.button"
	if typ == "passwordless" {
		title, intro, button = "account.addPasskey", "account.passkey.intro", "account.passkey.button"
	}
	pg := a.page(title)
	pg.WebAuthn = res.GetOptions()
	pg.Form = map[string]string{"intro": intro, "button": button, "action": PathAccountKey, "ceremony": "create", "type": typ,
		"id": res.GetId(), "named": "1", "name": name}
	pg.Links = []link{{URL: PathAccount, Key: "account.back"}}
	if errKey != "" {
		pg.Error = translate(a.lang, errKey)
	}
	p.tmpl.render(w, p.Logger, status, "webauthn", pg)
}

// accountKeySubmit starts registering a security key (type=u2f) or,
// after a fresh authentication, a passkey (type=passwordless) with
// start=1, or completes the registration with the browser's credential.
func (p *Pages) accountKeySubmit(w http.ResponseWriter, r *http.Request) {
	a := p.account(w, r, "type", "id", "credential", "name", "start")
	if a == nil {
		return
	}
	typ, err := keyType(a.form["type"])
	if err != nil {
		p.messagePage(w, r, a.lang, http.StatusBadRequest, "err.request")
		return
	}
	if typ == "passwordless" && !p.fresh(w, r, a) {
		return
	}
	if a.form["start"] != "" {
		p.renderAccountKey(w, r, a, typ, http.StatusOK, "", "")
		return
	}
	name := strings.TrimSpace(a.form["name"])
	if name == "" || len(name) > 200 {
		name = translate(a.lang, "factor."+map[string]string{"u2f": "keyName", "passwordless": "passkeyName"}[typ])
	}
	cred := a.form["credential"]
	if cred == "" || len(cred) > maxCredential || a.form["id"] == "" {
		p.renderAccountKey(w, r, a, typ, http.StatusBadRequest, "err.webauthn", name)
		return
	}
	_, err = p.Directory.VerifyWebAuthnRegistration(r.Context(), &directoryv1.VerifyWebAuthnRegistrationRequest{UserId: a.u.GetId(),
		Type: typ, Id: a.form["id"], Credential: cred, Name: name})
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists:
		p.renderAccountKey(w, r, a, typ, http.StatusBadRequest, "err.webauthn", name)
		return
	case connect.CodeAborted, connect.CodeNotFound:
		// The ceremony expired or was replaced: a fresh one.
		p.renderAccountKey(w, r, a, typ, http.StatusConflict, "err.webauthn", name)
		return
	}
	if err != nil {
		p.internal(w, r, a.lang, err)
		return
	}
	p.codesAfterEnrolling(w, r, a, typ)
}

// registerAccount mounts the account page's routes.
func (p *Pages) registerAccount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathAccount, p.accountPage)
	mux.HandleFunc("POST "+PathAccount, p.accountSubmit)
	mux.HandleFunc("GET "+PathAccountPassword, p.accountPasswordPage)
	mux.HandleFunc("POST "+PathAccountPassword, p.accountPasswordSubmit)
	mux.HandleFunc("GET "+PathAccountTOTP, toAccount)
	mux.HandleFunc("POST "+PathAccountTOTP, p.accountTOTPSubmit)
	mux.HandleFunc("GET "+PathAccountKey, toAccount)
	mux.HandleFunc("POST "+PathAccountKey, p.accountKeySubmit)
}
