package login

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// The pages mailed links open (package directory's users makes the links):
// one verifies an address, one accepts an invitation.
const (
	PathEmailVerify = "/ui/login/mail/verification"
	PathUserInit    = "/ui/login/user/init"
)

// checkUserCode is a loadCodeLink check for codes of kind.
func (p *Pages) checkUserCode(kind directoryv1.UserCodeKind) func(ctx context.Context, userID, code string) (*directoryv1.User, error) {
	return func(ctx context.Context, userID, code string) (*directoryv1.User, error) {
		res, err := p.Directory.CheckUserCode(ctx, &directoryv1.CheckUserCodeRequest{UserId: userID, Code: code, Kind: kind})
		return res.GetUser(), err
	}
}

// verifyLink loads a verification link.
func (p *Pages) verifyLink(w http.ResponseWriter, r *http.Request) *resetLink {
	return p.loadCodeLink(w, r, "verify.title", "verify.invalid", p.checkUserCode(directoryv1.UserCodeKind_USER_CODE_KIND_EMAIL))
}

// verifyPage asks to confirm the address. The GET changes nothing: mail
// scanners that open links must not use the code up (or verify for the
// user).
func (p *Pages) verifyPage(w http.ResponseWriter, r *http.Request) {
	l := p.verifyLink(w, r)
	if l == nil {
		return
	}
	l.pg.Form["email"] = l.user.GetEmail()
	p.tmpl.render(w, p.Logger, http.StatusOK, "verifyemail", l.pg)
}

// verifySubmit verifies the address.
func (p *Pages) verifySubmit(w http.ResponseWriter, r *http.Request) {
	l := p.verifyLink(w, r)
	if l == nil {
		return
	}
	pg := l.pg
	_, err := p.Directory.VerifyEmailCode(r.Context(), &directoryv1.VerifyEmailCodeRequest{UserId: l.user.GetId(), Code: l.form["code"]})
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition:
		p.messagePage(w, r, pg.Lang, http.StatusBadRequest, "verify.invalid")
		return
	case connect.CodeAlreadyExists:
		p.messagePage(w, r, pg.Lang, http.StatusConflict, "verify.taken")
		return
	}
	if err != nil {
		p.internal(w, r, pg.Lang, err)
		return
	}
	pg.Form = map[string]string{"done": "1", "org": l.user.GetOrgId(), "email": l.user.GetEmail()}
	pg.Title = "verify.done.title"
	p.tmpl.render(w, p.Logger, http.StatusOK, "verifyemail", pg)
}

// initLink loads an invitation link.
func (p *Pages) initLink(w http.ResponseWriter, r *http.Request) *resetLink {
	return p.loadCodeLink(w, r, "init.title", "init.invalid", p.checkUserCode(directoryv1.UserCodeKind_USER_CODE_KIND_INIT))
}

// initPage asks for the first password.
func (p *Pages) initPage(w http.ResponseWriter, r *http.Request) {
	l := p.initLink(w, r)
	if l == nil {
		return
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "userinit", l.pg)
}

// initSubmit sets the first password and verifies the address.
func (p *Pages) initSubmit(w http.ResponseWriter, r *http.Request) {
	l := p.initLink(w, r)
	if l == nil {
		return
	}
	pg := l.pg
	if key := checkNewPassword(l.form["newPassword"], l.form["confirmPassword"], l.org.GetPasswordPolicy()); key != "" {
		field := "newPassword"
		if key == "err.mismatch" {
			field = "confirmPassword"
		}
		pg.Errors[field] = translate(pg.Lang, key)
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, "userinit", pg)
		return
	}
	_, err := p.Directory.InitializeUser(r.Context(), &directoryv1.InitializeUserRequest{UserId: l.user.GetId(), Code: l.form["code"], Password: l.form["newPassword"]})
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		pg.Errors["newPassword"] = translate(pg.Lang, "err.policy")
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, "userinit", pg)
		return
	case connect.CodeNotFound, connect.CodeFailedPrecondition:
		p.messagePage(w, r, pg.Lang, http.StatusBadRequest, "init.invalid")
		return
	}
	if err != nil {
		p.internal(w, r, pg.Lang, err)
		return
	}
	pg.Form = map[string]string{"done": "1", "org": l.user.GetOrgId()}
	pg.Title = "init.done.title"
	p.tmpl.render(w, p.Logger, http.StatusOK, "userinit", pg)
}

// registerEmail mounts the pages of verification and invitation links.
func (p *Pages) registerEmail(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathEmailVerify, p.verifyPage)
	mux.HandleFunc("POST "+PathEmailVerify, p.verifySubmit)
	mux.HandleFunc("GET "+PathUserInit, p.initPage)
	mux.HandleFunc("POST "+PathUserInit, p.initSubmit)
}
