package login

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/boombuler/barcode/qr"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/federation"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// afterFirstFactor continues a login once u passed the first factor by
// amr: straight to the sign-in, or to the second-factor step the login
// policy and u's factors ask for (authorize.SecondFactorOwed). lp and
// factors come with the password check; nil asks the directory.
func (p *Pages) afterFirstFactor(w http.ResponseWriter, r *http.Request, f *flow, u *directoryv1.User, amr []string,
	lp *directoryv1.LoginPolicy, factors []string, known bool) {
	ctx := r.Context()
	if !known {
		org, err := p.org(ctx, u.GetOrgId())
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		lp = org.GetLoginPolicy()
		list, err := p.Directory.ListAuthFactors(ctx, &directoryv1.ListAuthFactorsRequest{UserId: u.GetId()})
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		factors = list.GetSecondFactors()
	}
	if lp.GetRequireVerifiedEmail() && !u.GetEmailVerified() {
		p.askEmailCode(w, r, f, u, authorize.FirstFactor{UserID: u.GetId(), AMR: amr, HasFactor: len(factors) > 0, Factors: factors})
		return
	}
	path := authorize.PathMFA
	switch authorize.SecondFactorOwed(lp, factors, amr, f.req.ACR) {
	case authorize.NoSecondFactor:
		p.signIn(w, r, f, u, amr)
		return
	case authorize.EnrollSecondFactor:
		path = authorize.PathMFAInit
	}
	ff := authorize.FirstFactor{UserID: u.GetId(), AMR: amr, HasFactor: len(factors) > 0, Factors: factors}
	f.ar.LoginName, f.ar.UserID = u.GetPreferredLoginName(), u.GetId()
	if path == authorize.PathMFA && ff.HasFactor && !p.keyFirst(f, ff) {
		// The code page answers this post at once (as Keycloak's and
		// ZITADEL's logins do), and its form carries the state
		// (codestate.go): no write, redirect or second read of the
		// pending request on the login's hot path.
		if state := p.sealState(f, ff); state != "" {
			p.renderCode(w, f.page("mfa.title"), http.StatusOK, false, ff, state)
			return
		}
	}
	if err := p.Store.SetAuthRequestUserFactor(ctx, f.ar.ID, u.GetPreferredLoginName(), u.GetId(), ff.Encode()); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	if path == authorize.PathMFA {
		p.askFactor(w, r, f, ff, nil)
		return
	}
	redirect(w, r, path, f.ar.ID)
}

// withSecondFactor is amr after a one-time code: otp, and mfa since the
// code is a second, distinct factor.
func withSecondFactor(amr []string, method string) []string {
	out := slices.Clone(amr)
	for _, m := range []string{method, oauth.AMRMFA} {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// loadFactor is load for the second-factor pages: the pending request and
// the first factor its user passed, recorded in the request or, from the
// code page's links and form, sealed in the state field (which is then
// recorded, for the pages after this one). Without either it sends the
// browser back to the login page; on failure it returns nil.
func (p *Pages) loadFactor(w http.ResponseWriter, r *http.Request, fields ...string) (*flow, authorize.FirstFactor) {
	v := p.visit(w, r, append(fields, stateField)...)
	if v == nil {
		return nil, authorize.FirstFactor{}
	}
	return p.factorFor(w, r, v)
}

// factorFor is loadFactor's second half, for v.
func (p *Pages) factorFor(w http.ResponseWriter, r *http.Request, v *visitor) (*flow, authorize.FirstFactor) {
	f := p.loadFor(w, r, v)
	if f == nil {
		return nil, authorize.FirstFactor{}
	}
	if ff, ok := authorize.ParseFirstFactor(f.ar); ok {
		return f, ff
	}
	sealed := r.URL.Query().Get(stateField)
	if v.form != nil {
		sealed = v.form[stateField]
	}
	st, ok := p.openState(sealed, v)
	if !ok {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return nil, authorize.FirstFactor{}
	}
	if err := p.Store.SetAuthRequestUserFactor(r.Context(), f.ar.ID, st.LoginName, st.FirstFactor.UserID, st.FirstFactor.Encode()); err != nil {
		p.internal(w, r, f.lang, err)
		return nil, authorize.FirstFactor{}
	}
	f.ar.LoginName, f.ar.UserID, f.ar.FirstFactor = st.LoginName, st.FirstFactor.UserID, st.FirstFactor.Encode()
	return f, st.FirstFactor
}

// keyFirst reports whether the second-factor step of ff's user starts
// with a security key or passkey: the user has one and no TOTP, or the
// request asks for the phishing-resistant class only a key reaches.
func (p *Pages) keyFirst(f *flow, ff authorize.FirstFactor) bool {
	return p.WebAuthn && hasWebAuthn(ff.Factors) && (!slices.Contains(ff.Factors, "otp") || f.req.ACR == oauth.ACRPhishingResistant)
}

// mfaPage asks for the second factor: a TOTP code, or a recovery code
// (?recovery=1). After a recovery code it says how many are left and
// offers to continue.
func (p *Pages) mfaPage(w http.ResponseWriter, r *http.Request) {
	f, ff := p.loadFactor(w, r)
	if f == nil {
		return
	}
	p.askFactor(w, r, f, ff, r.URL.Query())
}

// askFactor shows the second-factor step of ff's user; q chooses the
// factor (method, recovery).
func (p *Pages) askFactor(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor, q url.Values) {
	pg := f.page("mfa.title")
	if ff.Passed {
		p.renderPassed(w, http.StatusOK, pg, ff)
		return
	}
	if !ff.HasFactor {
		// From a session (step-up, a policy forcing a factor): the
		// password check that listed the user's factors is long past.
		list, err := p.Directory.ListAuthFactors(r.Context(), &directoryv1.ListAuthFactorsRequest{UserId: ff.UserID})
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		ff.HasFactor, ff.Factors = len(list.GetSecondFactors()) > 0, list.GetSecondFactors()
	}
	if !ff.HasFactor {
		// Asked for a second factor (acr_values, a policy forcing one)
		// by a user who has none yet: enroll one.
		redirect(w, r, authorize.PathMFAInit, f.ar.ID)
		return
	}
	keys := p.WebAuthn && hasWebAuthn(ff.Factors)
	if keys && q.Get("recovery") == "" && (q.Get("method") == "webauthn" || p.keyFirst(f, ff) && q.Get("method") == "") {
		p.renderKeyCheck(w, r, f, ff, http.StatusOK, "")
		return
	}
	p.renderCode(w, pg, http.StatusOK, q.Get("recovery") != "", ff, p.sealState(f, ff))
}

// renderCode shows the code form: a TOTP code, or a recovery code, with
// links to the user's other factors; state is the login's sealed state
// for the form and links ("": none, the pending request holds it).
func (p *Pages) renderCode(w http.ResponseWriter, pg *page, status int, recovery bool, ff authorize.FirstFactor, state string) {
	pg.Form[stateField] = state
	pg.Form["type"] = "otp"
	if recovery {
		pg.Form["type"] = "recovery"
	}
	if p.WebAuthn && hasWebAuthn(ff.Factors) {
		pg.Form["webauthn"] = "1"
	}
	if slices.Contains(ff.Factors, "otp") || !ff.HasFactor || ff.Factors == nil {
		pg.Form["otp"] = "1"
	}
	p.code.render(w, p.Logger, status, pg)
}

// hasWebAuthn reports whether factors hold a security key or passkey.
func hasWebAuthn(factors []string) bool {
	return slices.Contains(factors, "u2f") || slices.Contains(factors, "passwordless")
}

// renderPassed is the page after a recovery code (the codes left) or,
// loaded again, after an enrollment, with a button that completes the
// sign-in.
func (p *Pages) renderPassed(w http.ResponseWriter, status int, pg *page, ff authorize.FirstFactor) {
	pg.Title = "mfa.recovered.title"
	pg.Form["message"] = translate(pg.Lang, "mfa.recovered.left", strconv.Itoa(ff.RecoveryCodesLeft))
	if ff.Enrolled {
		pg.Title, pg.Form["message"] = "mfa.init.title", translate(pg.Lang, "mfa.enrolled")
	}
	p.tmpl.render(w, p.Logger, status, "mfapassed", pg)
}

// mfaSubmit checks the code with the directory (which applies the
// failed-attempt limits); a wrong, used or refused code reads the same.
// The code form's own state spares the pending request's read
// (codestate.go).
func (p *Pages) mfaSubmit(w http.ResponseWriter, r *http.Request) {
	v := p.visit(w, r, "type", "code", "continue", "credential", stateField)
	if v == nil {
		return
	}
	var (
		f  *flow
		ff authorize.FirstFactor
	)
	if typ := v.form["type"]; typ == "otp" || typ == "recovery" {
		if st, ok := p.openState(v.form[stateField], v); ok {
			f, ff = p.flowFromState(r, v, st), st.FirstFactor
		}
	}
	if f == nil {
		if f, ff = p.factorFor(w, r, v); f == nil {
			return
		}
	}
	ctx := r.Context()
	if ff.Passed {
		// The continue button after a recovery code.
		p.signInUser(w, r, f, ff, ff.AMR, nil)
		return
	}
	typ := f.form["type"]
	if typ == "webauthn" {
		p.keyCheckSubmit(w, r, f, ff)
		return
	}
	pg := f.page("mfa.title")
	pg.Form["type"] = typ
	if typ != "otp" && typ != "recovery" {
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.request")
		return
	}
	again := func(status int) { p.renderCode(w, pg, status, typ == "recovery", ff, p.sealState(f, ff)) }
	code := strings.TrimSpace(f.form["code"])
	if code == "" || len(code) > 64 {
		pg.Errors["code"] = translate(f.lang, "err.required")
		again(http.StatusBadRequest)
		return
	}
	res, err := p.Directory.CheckAuthFactor(ctx, &directoryv1.CheckAuthFactorRequest{OrgId: f.req.OrgID, UserId: ff.UserID,
		Type: typ, Code: code, ClientAddress: clientAddress(r)})
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodeResourceExhausted:
		pg.Errors["code"] = translate(f.lang, "err.code")
		again(http.StatusUnauthorized)
		return
	case connect.CodeFailedPrecondition:
		pg.Error = translate(f.lang, "err.inactive")
		again(http.StatusForbidden)
		return
	case connect.CodeNotFound:
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	amr := withSecondFactor(ff.AMR, oauth.AMROTP)
	if typ == "recovery" {
		ff = authorize.FirstFactor{UserID: ff.UserID, AMR: amr, Passed: true, RecoveryCodesLeft: int(res.GetRecoveryCodesLeft()), Carried: ff.Carried}
		err := p.Store.SetAuthRequestUserFactor(ctx, f.ar.ID, f.ar.LoginName, ff.UserID, ff.Encode())
		if errors.Is(err, session.ErrNotFound) {
			// Completed or gone since its code form was shown.
			p.Flow.Fail(w, r, f.req.UILocales, authorize.AlreadyCompleted())
			return
		}
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		p.renderPassed(w, http.StatusOK, pg, ff)
		return
	}
	p.signInUser(w, r, f, ff, amr, res.GetUser())
}

// signInUser signs in ff's user, of the request's organization,
// authenticated by amr after the second factor: only that check is new
// when ff's first factor was carried over from a session (a step-up).
func (p *Pages) signInUser(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor, amr []string, u *directoryv1.User) {
	checks := checksFor(amr, p.Now())
	if ff.Carried {
		checks = session.Checks{SecondFactor: p.Now()}
	}
	if u == nil || u.GetId() != ff.UserID {
		// Not read by the factor's check (the continue button after a
		// recovery code or an enrollment): read now.
		res, err := p.Directory.GetUser(r.Context(), &directoryv1.GetUserRequest{UserId: ff.UserID})
		if connect.CodeOf(err) == connect.CodeNotFound {
			redirect(w, r, authorize.PathLogin, f.ar.ID)
			return
		}
		if err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		u = res.GetUser()
	}
	if u.GetOrgId() != f.req.OrgID {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.wrongOrg")
		return
	}
	if u.GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.inactive")
		return
	}
	p.signInChecked(w, r, f, u, amr, checks)
}

// checksFor are the checks a sign-in by amr ran just now: the password,
// an external provider, a passkey alone (both factors at once), a second
// factor after one of the first.
func checksFor(amr []string, now time.Time) session.Checks {
	var c session.Checks
	has := func(m string) bool { return slices.Contains(amr, m) }
	first := has(oauth.AMRPassword) || has(federation.AMRFederated)
	if has(oauth.AMRPassword) {
		c.Password = now
	}
	if has(federation.AMRFederated) {
		c.External = now
	}
	if first && has(oauth.AMRMFA) && (has(oauth.AMROTP) || has(oauth.AMRHardware) || has(oauth.AMRSoftware)) {
		c.SecondFactor = now
	}
	if !first && has(oauth.AMRSoftware) && has(oauth.AMRUser) {
		c.MultiFactor = now
	}
	return c
}

// mfaInitPage enrolls a TOTP generator where the login policy forces a
// second factor: the otpauth:// URI as a QR code and a link, the secret
// as text, and one code input. Loading it again shows the same
// registration (the directory keeps the unfinished one).
func (p *Pages) mfaInitPage(w http.ResponseWriter, r *http.Request) {
	f, ff := p.loadFactor(w, r)
	if f == nil {
		return
	}
	otp, key, ok := p.enrollable(w, r, f)
	if !ok {
		return
	}
	if m := r.URL.Query().Get("method"); key && (m == "u2f" || m == "" && !otp) {
		p.renderKeyEnroll(w, r, f, ff, http.StatusOK, "", otp)
		return
	}
	p.renderInit(w, r, f, ff, http.StatusOK, "")
}

// enrollable says which factors a forced enrollment offers: those of the
// login policy's second factors (both when it lists none), a security
// key only where WebAuthn works (the issuer has a host name). A policy
// listing only security keys on an IP issuer still offers TOTP: the
// policy asks for a second factor, and TOTP is the one that works here.
func (p *Pages) enrollable(w http.ResponseWriter, r *http.Request, f *flow) (otp, key, ok bool) {
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return false, false, false
	}
	list := lp.GetSecondFactors()
	otp = len(list) == 0 || slices.Contains(list, "otp")
	key = p.WebAuthn && (len(list) == 0 || slices.Contains(list, "u2f"))
	return otp || !key, key, true
}

// renderInit shows the enrollment page with the user's unfinished TOTP
// registration and an optional error of the code field.
func (p *Pages) renderInit(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor, status int, codeErr string) {
	reg, err := p.Directory.StartTOTP(r.Context(), &directoryv1.StartTOTPRequest{UserId: ff.UserID})
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		// Enrolled meanwhile (another tab, the account page): ask for it.
		redirect(w, r, authorize.PathMFA, f.ar.ID)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	svg, err := qrSVG(reg.GetUri(), translate(f.lang, "mfa.init.qr"))
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	pg := f.page("mfa.init.title")
	pg.QR = svg
	pg.OTPURI = template.URL(reg.GetUri()) // #nosec G203 -- built by the directory: otpauth://totp/...
	pg.Secret = groupSecret(reg.GetSecret())
	if codeErr != "" {
		pg.Errors["code"] = codeErr
	}
	if _, key, ok := p.enrollable(w, r, f); !ok {
		return
	} else if key {
		pg.Form["u2f"] = "1"
	}
	p.tmpl.render(w, p.Logger, status, "mfainit", pg)
}

// mfaInitSubmit completes the enrollment with a code of the new generator
// and then signs the user in, showing the recovery codes first.
func (p *Pages) mfaInitSubmit(w http.ResponseWriter, r *http.Request) {
	f, ff := p.loadFactor(w, r, "code", "type", "id", "credential")
	if f == nil {
		return
	}
	if f.form["type"] == "u2f" {
		p.keyEnrollSubmit(w, r, f, ff)
		return
	}
	ctx := r.Context()
	code := strings.TrimSpace(f.form["code"])
	if code == "" || len(code) > 64 {
		p.renderInit(w, r, f, ff, http.StatusBadRequest, translate(f.lang, "err.required"))
		return
	}
	_, err := p.Directory.VerifyTOTP(ctx, &directoryv1.VerifyTOTPRequest{UserId: ff.UserID, Code: code})
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		p.renderInit(w, r, f, ff, http.StatusUnauthorized, translate(f.lang, "err.code"))
		return
	case connect.CodeAborted, connect.CodeNotFound:
		redirect(w, r, authorize.PathMFAInit, f.ar.ID)
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.enrolled(w, r, f, ff, withSecondFactor(ff.AMR, oauth.AMROTP))
}

// enrolled completes a forced enrollment: new recovery codes, shown once,
// then the sign-in by amr.
func (p *Pages) enrolled(w http.ResponseWriter, r *http.Request, f *flow, ff authorize.FirstFactor, amr []string) {
	ctx := r.Context()
	codes, err := p.Directory.GenerateRecoveryCodes(ctx, &directoryv1.GenerateRecoveryCodesRequest{UserId: ff.UserID})
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	ff = authorize.FirstFactor{UserID: ff.UserID, AMR: amr, Passed: true, RecoveryCodesLeft: len(codes.GetCodes()), Enrolled: true, Carried: ff.Carried}
	if err := p.Store.SetAuthRequestFirstFactor(ctx, f.ar.ID, ff.Encode()); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	pg := f.page("mfa.codes.title")
	pg.Policy = codes.GetCodes() // shown once, here
	p.tmpl.render(w, p.Logger, http.StatusOK, "mfacodes", pg)
}

// groupSecret shows a base32 secret in groups of four, as authenticator
// apps accept it typed.
func groupSecret(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// qrSVG renders content as a QR code in inline SVG (no image request, no
// external service, nothing the page's CSP must allow): one path of unit
// squares in a viewBox with the four-module quiet zone.
func qrSVG(content, label string) (template.HTML, error) {
	code, err := qr.Encode(content, qr.M, qr.Auto)
	if err != nil {
		return "", err
	}
	bounds := code.Bounds()
	const quiet = 4
	size := bounds.Dx() + 2*quiet
	var d strings.Builder
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if r, _, _, _ := code.At(x, y).RGBA(); r == 0 {
				d.WriteString("M" + strconv.Itoa(x-bounds.Min.X+quiet) + " " + strconv.Itoa(y-bounds.Min.Y+quiet) + "h1v1h-1z")
			}
		}
	}
	n := strconv.Itoa(size)
	// label is a translated message: escaped like any text.
	return template.HTML(`<svg class="qr" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ` + n + ` ` + n + `" width="220" height="220" role="img" aria-label="` +
		template.HTMLEscapeString(label) + `" shape-rendering="crispEdges"><rect width="` + n + `" height="` + n + `" fill="#fff"/><path fill="#000" d="` +
		d.String() + `"/></svg>`), nil // #nosec G203 -- numbers and an escaped label only
}
