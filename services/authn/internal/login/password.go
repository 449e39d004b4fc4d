package login

import (
	"net/http"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
)

// loginNamePage asks for the login name, pre-filled from the login_hint.
func (p *Pages) loginNamePage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	pg := f.page("login.title")
	if r.URL.Query().Get("other") != "" {
		pg.LoginName = ""
	} else if pg.LoginName == "" {
		pg.LoginName = f.req.LoginHint
	}
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return
	}
	pg.AllowRegister = lp.GetAllowRegister() && lp.GetAllowUsernamePassword()
	if !lp.GetHidePasswordReset() {
		pg.Form["reset"] = "1"
	}
	idps, err := p.idpButtons(r.Context(), f.req.OrgID, lp)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	pg.IdPs = idps
	passkey := p.WebAuthn && lp.GetPasswordlessAllowed()
	if passkey {
		pg.Form["passkey"] = "1"
	}
	if !lp.GetAllowUsernamePassword() {
		// No password form: passkeys and external providers remain.
		pg.Form["nopassword"] = "1"
		if !passkey && len(idps) == 0 {
			pg.Error = translate(f.lang, "err.passwordDisabled")
		}
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "loginname", pg)
}

// loginPolicy reads the request's organization's login policy, or answers
// with the error page.
func (p *Pages) loginPolicy(w http.ResponseWriter, r *http.Request, f *flow) (*directoryv1.LoginPolicy, bool) {
	org, err := p.org(r.Context(), f.req.OrgID)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return nil, false
	}
	return org.GetLoginPolicy(), true
}

// loginNameSubmit remembers the login name and moves on to the password
// page. Whether the name exists is not revealed unless the organization's
// login policy turns ignore_unknown_usernames off.
func (p *Pages) loginNameSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "loginName")
	if f == nil {
		return
	}
	name := strings.TrimSpace(f.form["loginName"])
	if name == "" || len(name) > 400 {
		pg := f.page("login.title")
		pg.Errors["loginName"] = translate(f.lang, "err.required")
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, "loginname", pg)
		return
	}
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return
	}
	if !lp.GetAllowUsernamePassword() {
		pg := f.page("login.title")
		pg.Error = translate(f.lang, "err.passwordDisabled")
		p.tmpl.render(w, p.Logger, http.StatusForbidden, "loginname", pg)
		return
	}
	if !lp.GetIgnoreUnknownUsernames() {
		_, err := p.Directory.LookupUser(r.Context(), &directoryv1.LookupUserRequest{OrgId: f.req.OrgID, LoginName: name})
		if connect.CodeOf(err) == connect.CodeNotFound {
			pg := f.page("login.title")
			pg.LoginName = name
			pg.AllowRegister = lp.GetAllowRegister()
			pg.Errors["loginName"] = translate(f.lang, "err.unknownUser")
			p.tmpl.render(w, p.Logger, http.StatusUnauthorized, "loginname", pg)
			return
		}
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
	}
	if err := p.Store.SetAuthRequestUser(r.Context(), f.ar.ID, name, ""); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	redirect(w, r, authorize.PathPassword, f.ar.ID)
}

func (p *Pages) passwordPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	if f.ar.LoginName == "" {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "password", f.page("password.title"))
}

// passwordSubmit checks the password with the directory, which applies the
// failed-password limits. Wrong password, unknown user and an attempt the
// limits refuse read the same (status and text); a deactivated account is
// said clearly, and only after the correct password.
func (p *Pages) passwordSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "password")
	if f == nil {
		return
	}
	if f.ar.LoginName == "" {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	fail := func(status int, key string) {
		pg := f.page("password.title")
		pg.Errors["password"] = translate(f.lang, key)
		p.tmpl.render(w, p.Logger, status, "password", pg)
	}
	if f.form["password"] == "" {
		fail(http.StatusBadRequest, "err.required")
		return
	}
	in := &directoryv1.VerifyPasswordRequest{OrgId: f.req.OrgID, Password: f.form["password"], ClientAddress: clientAddress(r)}
	if f.ar.UserID != "" {
		in.UserId = f.ar.UserID
	} else {
		in.LoginName = f.ar.LoginName
	}
	resp, err := p.Directory.VerifyPassword(r.Context(), in)
	if key, status, ok := passwordError(err); ok {
		fail(status, key)
		return
	} else if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	u := resp.GetUser()
	if u.GetOrgId() != f.req.OrgID {
		fail(http.StatusForbidden, "err.wrongOrg")
		return
	}
	if resp.GetChangeRequired() {
		if err := p.Store.SetAuthRequestUser(r.Context(), f.ar.ID, f.ar.LoginName, u.GetId()); err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		redirect(w, r, PathChangePassword, f.ar.ID)
		return
	}
	p.afterFirstFactor(w, r, f, u, []string{oauth.AMRPassword}, resp.GetLoginPolicy(), resp.GetSecondFactors(), true)
}

// passwordError maps the directory's answers to a password check to a
// page message: ok false means an unexpected error. ResourceExhausted (a
// lockout, as directories before the progressive delay answered it) reads
// like a wrong password: a distinct answer would tell an attacker which
// names exist and whose login it is blocking.
func passwordError(err error) (key string, status int, ok bool) {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodeNotFound, connect.CodeInvalidArgument, connect.CodeResourceExhausted:
		return "err.credentials", http.StatusUnauthorized, true
	case connect.CodeFailedPrecondition:
		return "err.inactive", http.StatusForbidden, true
	case connect.CodePermissionDenied:
		return "err.passwordDisabled", http.StatusForbidden, true
	}
	return "", 0, false
}
