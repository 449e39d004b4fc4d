package login

import (
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
)

var registerFields = []string{"userName", "firstName", "lastName", "email", "password", "confirmPassword"}

// registerPage shows the registration form (prompt=create, or the link on
// the login name page) with the organization's password policy.
// Where the organization's login policy does not allow registration, the
// form is not shown: the login name page is (prompt=create is then
// ignored, as OIDC Prompt Create allows).
func (p *Pages) registerPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return
	}
	if !lp.GetAllowRegister() || !lp.GetAllowUsernamePassword() {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	pg := f.page("register.title")
	if err := p.addPolicy(r.Context(), f, pg); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "register", pg)
}

// registerSubmit creates the user in the request's organization through
// the directory, which enforces the password policy again, and signs the
// new user in.
func (p *Pages) registerSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, registerFields...)
	if f == nil {
		return
	}
	ctx := r.Context()
	pg := f.page("register.title")
	org, err := p.org(ctx, f.req.OrgID)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	if lp := org.GetLoginPolicy(); !lp.GetAllowRegister() || !lp.GetAllowUsernamePassword() {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.registerDisabled")
		return
	}
	pg.Policy = policyLines(f.lang, org.GetPasswordPolicy())
	for _, k := range []string{"userName", "firstName", "lastName", "email"} {
		pg.Form[k] = strings.TrimSpace(f.form[k])
	}
	if n := len(pg.Form["userName"]); n == 0 || n > 200 {
		pg.Errors["userName"] = translate(f.lang, "err.required")
	}
	if key := checkNewPassword(f.form["password"], f.form["confirmPassword"], org.GetPasswordPolicy()); key != "" {
		field := "password"
		if key == "err.mismatch" {
			field = "confirmPassword"
		}
		pg.Errors[field] = translate(f.lang, key)
	}
	show := func(status int) { p.tmpl.render(w, p.Logger, status, "register", pg) }
	if len(pg.Errors) > 0 {
		show(http.StatusBadRequest)
		return
	}
	resp, err := p.Directory.RegisterUser(ctx, &directoryv1.RegisterUserRequest{
		OrgId: f.req.OrgID, UserName: pg.Form["userName"], FirstName: pg.Form["firstName"], LastName: pg.Form["lastName"],
		Email: pg.Form["email"], Password: f.form["password"], PreferredLanguage: f.lang,
	})
	switch connect.CodeOf(err) {
	case connect.CodeAlreadyExists:
		pg.Errors["userName"] = translate(f.lang, "err.taken")
		show(http.StatusConflict)
		return
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		// The directory's messages are client-safe (STYLE.md).
		msg := ""
		if ce := new(connect.Error); errors.As(err, &ce) {
			msg = ce.Message()
		}
		pg.Error = translate(f.lang, "err.invalid", msg)
		show(http.StatusBadRequest)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.afterFirstFactor(w, r, f, resp.GetUser(), []string{oauth.AMRPassword}, nil, nil, false)
}
