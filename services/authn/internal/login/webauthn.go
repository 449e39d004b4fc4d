package login

import (
	"net/http"
	"slices"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
)

// The WebAuthn steps of the login: a security key or passkey as the
// second factor, a passkey alone (passwordless), a security key enrolled
// where the policy forces a second factor. The directory runs the
// ceremonies (challenge bound to the pending request, single use); the
// pages carry its options to the browser's one script and the answer
// back.

// maxCredential bounds the credential field (as the directory does).
const maxCredential = 64 << 10

// webauthnPage is the page of one ceremony: options for the browser, what
// the form posts, and the ways out.
type webauthnPage struct {
	title, intro, button, action, ceremony, typ, id string
	links                                           []link
}

func (p *Pages) renderWebAuthn(w http.ResponseWriter, f *flow, status int, errKey, options string, wp webauthnPage) {
	pg := f.page(wp.title)
	pg.WebAuthn = options
	pg.Form = map[string]string{"intro": wp.intro, "button": wp.button, "action": wp.action, "ceremony": wp.ceremony, "type": wp.typ, "id": wp.id}
	pg.Links = wp.links
	if errKey != "" {
		pg.Error = translate(f.lang, errKey)
	}
	p.tmpl.render(w, p.Logger, status, "webauthn", pg)
}

// credential is the posted PublicKeyCredential, or "" when missing or too
// large.
func credential(f *flow) string {
	c := f.form["credential"]
	if len(c) > maxCredential {
		return ""
	}
	return c
}

// renderKeyCheck asks for one of the user's security keys or passkeys as
// the second factor, with a fresh ceremony.
func (p *Pages) renderKeyCheck(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor, status int, errKey string) {
	res, err := p.Directory.StartWebAuthnLogin(r.Context(), &directoryv1.StartWebAuthnLoginRequest{Binding: f.ar.ID, UserId: ff.UserID})
	if connect.CodeOf(err) == connect.CodeAborted {
		// No key any more (removed meanwhile): the code form.
		p.renderCode(w, f.page("mfa.title"), http.StatusOK, false, authorize.FirstFactor{HasFactor: true, Factors: []string{"otp"}}, p.sealState(f, ff))
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	var links []link
	if slices.Contains(ff.Factors, "otp") {
		links = append(links, link{URL: authorize.PageURL(authorize.PathMFA, f.ar.ID) + "&method=otp", Key: "mfa.useOTP"})
	}
	links = append(links, link{URL: authorize.PageURL(authorize.PathMFA, f.ar.ID) + "&recovery=1", Key: "mfa.useRecovery"})
	p.renderWebAuthn(w, f, status, errKey, res.GetOptions(), webauthnPage{title: "mfa.title", intro: "mfa.webauthn.intro",
		button: "mfa.webauthn.button", action: authorize.PathMFA, ceremony: "get", typ: "webauthn", links: links})
}

// keyCheckSubmit checks the assertion; a refused one reads like a wrong
// code and asks again with a new challenge.
func (p *Pages) keyCheckSubmit(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor) {
	cred := credential(f)
	if cred == "" {
		p.renderKeyCheck(w, r, f, ff, http.StatusBadRequest, "err.webauthn")
		return
	}
	res, err := p.Directory.CheckWebAuthnLogin(r.Context(), &directoryv1.CheckWebAuthnLoginRequest{Binding: f.ar.ID, UserId: ff.UserID,
		OrgId: f.req.OrgID, Credential: cred, ClientAddress: clientAddress(r)})
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodeResourceExhausted:
		p.renderKeyCheck(w, r, f, ff, http.StatusUnauthorized, "err.webauthn")
		return
	case connect.CodeFailedPrecondition:
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.inactive")
		return
	case connect.CodeNotFound:
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	amr := withSecondFactor(ff.AMR, oauth.AMRHardware)
	if res.GetFactorType() == "passwordless" {
		amr = withSecondFactor(ff.AMR, oauth.AMRSoftware)
		if res.GetUserVerified() {
			amr = append(amr, oauth.AMRUser)
		}
	}
	p.signInUser(w, r, f, ff, amr, res.GetUser())
}

// passkeyAllowed reports whether the request's organization lets users
// sign in with a passkey here, or answers with the page that says why not.
func (p *Pages) passkeyAllowed(w http.ResponseWriter, r *http.Request, f *flow) (*directoryv1.LoginPolicy, bool) {
	if !p.WebAuthn {
		p.messagePage(w, r, f.lang, http.StatusNotFound, "err.webauthnUnavailable")
		return nil, false
	}
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return nil, false
	}
	if !lp.GetPasswordlessAllowed() {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.passkeyDisabled")
		return nil, false
	}
	return lp, true
}

// passkeyPage offers the passkey sign-in: a ceremony for anyone's passkey.
func (p *Pages) passkeyPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	lp, ok := p.passkeyAllowed(w, r, f)
	if !ok {
		return
	}
	p.renderPasskey(w, r, f, lp, http.StatusOK, "")
}

func (p *Pages) renderPasskey(w http.ResponseWriter, r *http.Request, f *flow, lp *directoryv1.LoginPolicy, status int, errKey string) {
	res, err := p.Directory.StartWebAuthnLogin(r.Context(), &directoryv1.StartWebAuthnLoginRequest{Binding: f.ar.ID})
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	var links []link
	if lp.GetAllowUsernamePassword() {
		links = append(links, link{URL: authorize.PageURL(authorize.PathLogin, f.ar.ID), Key: "passkey.usePassword"})
	}
	f.ar.LoginName = "" // whose passkey it is, the browser tells
	p.renderWebAuthn(w, f, status, errKey, res.GetOptions(), webauthnPage{title: "passkey.title", intro: "passkey.intro",
		button: "passkey.button", action: PathPasskey, ceremony: "get", typ: "passkey", links: links})
}

// passkeySubmit signs in the passkey's user: a passkey with user
// verification is two factors in one (possession and the PIN or
// biometrics), so no second factor follows.
func (p *Pages) passkeySubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "type", "credential")
	if f == nil {
		return
	}
	lp, ok := p.passkeyAllowed(w, r, f)
	if !ok {
		return
	}
	cred := credential(f)
	if cred == "" {
		p.renderPasskey(w, r, f, lp, http.StatusBadRequest, "err.webauthn")
		return
	}
	res, err := p.Directory.CheckWebAuthnLogin(r.Context(), &directoryv1.CheckWebAuthnLoginRequest{Binding: f.ar.ID,
		OrgId: f.req.OrgID, Credential: cred, ClientAddress: clientAddress(r)})
	if c := connect.CodeOf(err); c == connect.CodeUnauthenticated || c == connect.CodeResourceExhausted {
		p.renderPasskey(w, r, f, lp, http.StatusUnauthorized, "err.webauthn")
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	u := res.GetUser()
	if u.GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.inactive")
		return
	}
	// An admin-set password is changed before any sign-in completes,
	// whichever way the user authenticated (as after an external one).
	p.signInLinked(w, r, f, u, []string{oauth.AMRSoftware, oauth.AMRUser, oauth.AMRMFA})
}

// renderKeyEnroll registers a security key where the policy forces a
// second factor; otp adds the way back to an authenticator app.
func (p *Pages) renderKeyEnroll(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor, status int, errKey string, otp bool) {
	res, err := p.Directory.StartWebAuthnRegistration(r.Context(), &directoryv1.StartWebAuthnRegistrationRequest{UserId: ff.UserID, Type: "u2f"})
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	var links []link
	if otp {
		links = append(links, link{URL: authorize.PageURL(authorize.PathMFAInit, f.ar.ID) + "&method=otp", Key: "mfa.init.useOTP"})
	}
	p.renderWebAuthn(w, f, status, errKey, res.GetOptions(), webauthnPage{title: "mfa.init.title", intro: "mfa.init.key.intro",
		button: "mfa.init.key.button", action: authorize.PathMFAInit, ceremony: "create", typ: "u2f", id: res.GetId(), links: links})
}

// keyEnrollSubmit completes the security key's registration and signs in
// (showing the new recovery codes first).
func (p *Pages) keyEnrollSubmit(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor) {
	otp, key, ok := p.enrollable(w, r, f)
	if !ok {
		return
	}
	if !key {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.webauthnUnavailable")
		return
	}
	cred := credential(f)
	if cred == "" || f.form["id"] == "" {
		p.renderKeyEnroll(w, r, f, ff, http.StatusBadRequest, "err.webauthn", otp)
		return
	}
	_, err := p.Directory.VerifyWebAuthnRegistration(r.Context(), &directoryv1.VerifyWebAuthnRegistrationRequest{UserId: ff.UserID, Type: "u2f",
		Id: f.form["id"], Credential: cred, Name: translate(f.lang, "factor.keyName")})
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists:
		p.renderKeyEnroll(w, r, f, ff, http.StatusBadRequest, "err.webauthn", otp)
		return
	case connect.CodeAborted, connect.CodeNotFound:
		redirect(w, r, authorize.PathMFAInit, f.ar.ID)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.enrolled(w, r, f, ff, withSecondFactor(ff.AMR, oauth.AMRHardware))
}
