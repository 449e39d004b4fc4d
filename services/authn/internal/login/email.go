package login

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
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
	p.submitNewPassword(w, r, l, "userinit", "init.invalid", "init.done.title", func(ctx context.Context, pw string) error {
		_, err := p.Directory.InitializeUser(ctx, &directoryv1.InitializeUserRequest{UserId: l.user.GetId(), Code: l.form["code"], Password: pw})
		return err
	})
}

// registerEmail mounts the pages of verification and invitation links.
func (p *Pages) registerEmail(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathEmailVerify, p.verifyPage)
	mux.HandleFunc("POST "+PathEmailVerify, p.verifySubmit)
	mux.HandleFunc("GET "+PathUserInit, p.initPage)
	mux.HandleFunc("POST "+PathUserInit, p.initSubmit)
	mux.HandleFunc("GET "+PathEmailCode, p.emailCodePage)
	mux.HandleFunc("POST "+PathEmailCode, p.emailCodeSubmit)
}

// PathEmailCode is the login's step where a user whose address is not
// verified, in an organization whose login policy requires it (Gatehouse's
// require_verified_email), proves it before anything is issued.
const PathEmailCode = "/ui/login/mail/code"

// emailCodeFields are the step's form fields.
var emailCodeFields = []string{"code", "resend"}

// askEmailCode keeps the first factor u passed with the pending request,
// mails u a code (once a minute) and sends the browser to the step.
func (p *Pages) askEmailCode(w http.ResponseWriter, r *http.Request, f *flow, u *directoryv1.User, ff authorize.FirstFactor) {
	if u.GetEmail() == "" {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "verify.noEmail")
		return
	}
	if err := p.Store.SetAuthRequestUserFactor(r.Context(), f.ar.ID, u.GetPreferredLoginName(), u.GetId(), ff.Encode()); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	if !p.sendEmailCode(w, r, f, u.GetId()) {
		return
	}
	redirect(w, r, PathEmailCode, f.ar.ID)
}

// sendEmailCode asks the directory to mail the code; on failure it has
// answered.
func (p *Pages) sendEmailCode(w http.ResponseWriter, r *http.Request, f *flow, userID string) bool {
	_, err := p.Directory.SendEmailCode(r.Context(), &directoryv1.SendEmailCodeRequest{UserId: userID, Language: f.lang})
	switch connect.CodeOf(err) {
	case connect.CodeFailedPrecondition:
		p.messagePage(w, r, f.lang, http.StatusConflict, "err.mailUnavailable")
		return false
	case connect.CodeAborted:
		return true // verified meanwhile: the step lets the user continue
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return false
	}
	return true
}

// emailCodePage asks for the code mailed to the user's address.
func (p *Pages) emailCodePage(w http.ResponseWriter, r *http.Request) {
	f, ff := p.loadFactor(w, r)
	if f == nil {
		return
	}
	p.renderEmailCode(w, f, ff, http.StatusOK, "")
}

func (p *Pages) renderEmailCode(w http.ResponseWriter, f *flow, _ authorize.FirstFactor, status int, errKey string) {
	pg := f.page("verify.title")
	if errKey != "" {
		pg.Errors["code"] = translate(f.lang, errKey)
	}
	p.tmpl.render(w, p.Logger, status, "emailcode", pg)
}

// emailCodeSubmit checks the code (or, without one, whether the address
// was verified by the mailed link meanwhile), or mails a new one; once
// the address is verified the login goes on where it stopped.
func (p *Pages) emailCodeSubmit(w http.ResponseWriter, r *http.Request) {
	f, ff := p.loadFactor(w, r, emailCodeFields...)
	if f == nil {
		return
	}
	ctx := r.Context()
	if f.form["resend"] != "" {
		if p.sendEmailCode(w, r, f, ff.UserID) {
			pg := f.page("verify.title")
			pg.Form["sent"] = "1"
			p.tmpl.render(w, p.Logger, http.StatusOK, "emailcode", pg)
		}
		return
	}
	code := strings.TrimSpace(f.form["code"])
	if code != "" {
		_, err := p.Directory.VerifyEmailCode(ctx, &directoryv1.VerifyEmailCodeRequest{UserId: ff.UserID, Code: code})
		switch connect.CodeOf(err) {
		case connect.CodeInvalidArgument, connect.CodeNotFound:
			p.renderEmailCode(w, f, ff, http.StatusBadRequest, "verify.wrongCode")
			return
		case connect.CodeAlreadyExists:
			p.messagePage(w, r, f.lang, http.StatusConflict, "verify.taken")
			return
		}
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
	}
	res, err := p.Directory.GetUser(ctx, &directoryv1.GetUserRequest{UserId: ff.UserID})
	if connect.CodeOf(err) == connect.CodeNotFound {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	u := res.GetUser()
	if !u.GetEmailVerified() {
		p.renderEmailCode(w, f, ff, http.StatusBadRequest, "verify.wrongCode")
		return
	}
	p.afterFirstFactor(w, r, f, u, ff.AMR, nil, nil, false)
}
