package login

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// The password reset pages: "Forgot password?" of a pending request, and
// the page the mailed link opens (package directory's internalapi makes
// the link).
const (
	PathPasswordReset = "/ui/login/password/reset"
	PathPasswordNew   = "/ui/login/password/new"
)

// resetAllowed reports whether f's organization offers password reset (it
// signs in with passwords and does not hide the link); if not, it has
// answered 404.
func (p *Pages) resetAllowed(w http.ResponseWriter, r *http.Request, f *flow) bool {
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return false
	}
	if lp.GetHidePasswordReset() || !lp.GetAllowUsernamePassword() {
		p.messagePage(w, r, f.lang, http.StatusNotFound, "err.request")
		return false
	}
	return true
}

// resetPage asks for the login name whose password to reset.
func (p *Pages) resetPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil || !p.resetAllowed(w, r, f) {
		return
	}
	pg := f.page("reset.title")
	if pg.LoginName == "" {
		pg.LoginName = f.req.LoginHint
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "resetrequest", pg)
}

// resetSubmit asks the directory to mail a reset link, and answers the
// same page whether or not the name has an account (no enumeration).
func (p *Pages) resetSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "loginName")
	if f == nil || !p.resetAllowed(w, r, f) {
		return
	}
	pg := f.page("reset.title")
	name := strings.TrimSpace(f.form["loginName"])
	pg.LoginName = name
	if name == "" || len(name) > 320 {
		pg.Errors["loginName"] = translate(f.lang, "err.required")
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, "resetrequest", pg)
		return
	}
	_, err := p.Directory.RequestPasswordReset(r.Context(), &directoryv1.RequestPasswordResetRequest{OrgId: f.req.OrgID, LoginName: name, Language: f.lang})
	if connect.CodeOf(err) == connect.CodeFailedPrecondition {
		// No relay: the operator's to mend, the user's to know.
		pg.Error = translate(f.lang, "err.mailUnavailable")
		p.tmpl.render(w, p.Logger, http.StatusConflict, "resetrequest", pg)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	pg.Form["sent"] = "1"
	p.tmpl.render(w, p.Logger, http.StatusOK, "resetrequest", pg)
}

// resetLink is the new-password page's state: the link's user and code,
// checked with the directory, and the browser.
type resetLink struct {
	user *directoryv1.User
	org  *directoryv1.GetOrgResponse
	pg   *page
	form map[string]string
}

// loadResetLink checks a reset link's code; on failure it has answered.
func (p *Pages) loadResetLink(w http.ResponseWriter, r *http.Request) *resetLink {
	return p.loadCodeLink(w, r, "reset.new.title", "reset.invalid", func(ctx context.Context, userID, code string) (*directoryv1.User, error) {
		res, err := p.Directory.CheckPasswordResetCode(ctx, &directoryv1.CheckPasswordResetCodeRequest{UserId: userID, Code: code})
		return res.GetUser(), err
	})
}

// loadCodeLink checks the code of a mailed link (query on GET, form on
// POST, with the browser's CSRF token) with check, and builds the page
// titled title; a code check refuses shows invalid. On failure it has
// answered.
func (p *Pages) loadCodeLink(w http.ResponseWriter, r *http.Request, title, invalid string,
	check func(ctx context.Context, userID, code string) (*directoryv1.User, error)) *resetLink {
	lang := Language([]string{r.URL.Query().Get("ui_locales")}, r.Header.Get("Accept-Language"))
	ctx := r.Context()
	ua, err := p.Browsers.Ensure(ctx, w, r)
	if err != nil {
		p.internal(w, r, lang, err)
		return nil
	}
	form := map[string]string{"userID": r.URL.Query().Get("userID"), "code": r.URL.Query().Get("code")}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			p.messagePage(w, r, lang, http.StatusBadRequest, "err.request")
			return nil
		}
		for _, k := range []string{"userID", "code", "csrf", "newPassword", "confirmPassword"} {
			form[k] = r.PostForm.Get(k)
		}
		if subtle.ConstantTimeCompare([]byte(form["csrf"]), []byte(ua.CSRFToken)) != 1 {
			p.messagePage(w, r, lang, http.StatusForbidden, "err.csrf")
			return nil
		}
	}
	u, err := check(ctx, form["userID"], form["code"])
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition:
		p.messagePage(w, r, lang, http.StatusBadRequest, invalid)
		return nil
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return nil
	}
	if r.URL.Query().Get("ui_locales") == "" && u.GetPreferredLanguage() != "" {
		lang = Language([]string{u.GetPreferredLanguage()}, r.Header.Get("Accept-Language"))
	}
	org, err := p.org(ctx, u.GetOrgId())
	if err != nil {
		p.internal(w, r, lang, err)
		return nil
	}
	pg := &page{Lang: lang, Title: title, CSRF: ua.CSRFToken, LoginName: u.GetPreferredLoginName(),
		Errors: map[string]string{}, Form: map[string]string{"userID": form["userID"], "code": form["code"]},
		Policy: policyLines(lang, org.GetPasswordPolicy())}
	return &resetLink{user: u, org: org, pg: pg, form: form}
}

// resetNewPage asks for the new password.
func (p *Pages) resetNewPage(w http.ResponseWriter, r *http.Request) {
	l := p.loadResetLink(w, r)
	if l == nil {
		return
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "resetnew", l.pg)
}

// resetNewSubmit sets the new password; the directory then ends the
// user's sessions and tokens, and the user signs in anew.
func (p *Pages) resetNewSubmit(w http.ResponseWriter, r *http.Request) {
	l := p.loadResetLink(w, r)
	if l == nil {
		return
	}
	p.submitNewPassword(w, r, l, "resetnew", "reset.invalid", "reset.done.title", func(ctx context.Context, pw string) error {
		_, err := p.Directory.ResetPassword(ctx, &directoryv1.ResetPasswordRequest{UserId: l.user.GetId(), Code: l.form["code"], Password: pw})
		return err
	})
}

// submitNewPassword checks the form's new password against the policy
// and sets it with set (a link's code goes with it), answering the page
// tmpl; a code refused shows invalid, success the page titled done.
func (p *Pages) submitNewPassword(w http.ResponseWriter, r *http.Request, l *resetLink, tmpl, invalid, done string,
	set func(ctx context.Context, password string) error) {
	pg := l.pg
	if key := checkNewPassword(l.form["newPassword"], l.form["confirmPassword"], l.org.GetPasswordPolicy()); key != "" {
		field := "newPassword"
		if key == "err.mismatch" {
			field = "confirmPassword"
		}
		pg.Errors[field] = translate(pg.Lang, key)
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, tmpl, pg)
		return
	}
	err := set(r.Context(), l.form["newPassword"])
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		// The policy (checked above, so rare: the history) or a code used
		// meanwhile.
		pg.Errors["newPassword"] = translate(pg.Lang, "err.policy")
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, tmpl, pg)
		return
	case connect.CodeNotFound, connect.CodeFailedPrecondition:
		p.messagePage(w, r, pg.Lang, http.StatusBadRequest, invalid)
		return
	}
	if err != nil {
		p.internal(w, r, pg.Lang, err)
		return
	}
	pg.Form = map[string]string{"done": "1", "org": l.user.GetOrgId()}
	pg.Title = done
	p.tmpl.render(w, p.Logger, http.StatusOK, tmpl, pg)
}

// registerReset mounts the reset pages.
func (p *Pages) registerReset(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathPasswordReset, p.resetPage)
	mux.HandleFunc("POST "+PathPasswordReset, p.resetSubmit)
	mux.HandleFunc("GET "+PathPasswordNew, p.resetNewPage)
	mux.HandleFunc("POST "+PathPasswordNew, p.resetNewSubmit)
}
