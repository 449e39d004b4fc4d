package login

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/federation"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Sign-in through an organization's external identity providers: the
// login page's buttons (and the authorization endpoint's shortcut scope)
// begin it, /idps/callback finishes it. A linked identity signs its user
// in; an unknown one is registered when the IdP says autoRegister.

// Paths of the federation pages.
const (
	PathIdP         = "/ui/login/idp"
	PathIdPCallback = "/idps/callback"
	// PathIdPLink offers an unknown identity's user to link it to an
	// existing account (its password) or to register a new one.
	PathIdPLink         = "/ui/login/idp/link"
	PathIdPLinkRegister = "/ui/login/idp/register"
)

// Federation is the relying party (federation.RP).
type Federation interface {
	Begin(ctx context.Context, idp *directoryv1.IdP, secret string) (federation.Start, error)
	Finish(ctx context.Context, idp *directoryv1.IdP, secret string, response url.Values, verifier, nonce string) (*federation.Identity, error)
}

// idpButton is one identity provider on the login page.
type idpButton struct {
	ID, Name string
	Vendor   bool // stylingType VENDOR
}

// idpButtons lists the organization's active identity providers, when its
// login policy allows external sign-in.
func (p *Pages) idpButtons(ctx context.Context, orgID string, lp *directoryv1.LoginPolicy) ([]idpButton, error) {
	if p.RP == nil || !lp.GetAllowExternalIdp() {
		return nil, nil
	}
	res, err := p.Directory.ListIdPs(ctx, &directoryv1.ListIdPsRequest{OrgId: orgID})
	if err != nil {
		return nil, err
	}
	var out []idpButton
	for _, i := range res.GetIdps() {
		if i.GetActive() {
			out = append(out, idpButton{ID: i.GetId(), Name: i.GetName(), Vendor: i.GetStylingType() == directoryv1.StylingType_STYLING_TYPE_VENDOR})
		}
	}
	return out, nil
}

// idpSubmit is a button of the login page.
func (p *Pages) idpSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "idpID")
	if f == nil {
		return
	}
	p.BeginIdP(w, r, f.ua, f.ar, f.req, f.form["idpID"])
}

// BeginIdP sends the browser to the identity provider idpID of the
// request's organization for the pending request ar (the authorization
// endpoint calls it for the shortcut scope).
func (p *Pages) BeginIdP(w http.ResponseWriter, r *http.Request, ua session.UserAgent, ar session.AuthRequest, req *authorize.Request, idpID string) {
	ctx := r.Context()
	lang := Language(req.UILocales, r.Header.Get("Accept-Language"))
	// The organization's login policy may turn external sign-in off, for
	// the buttons and the shortcut scope alike.
	org, err := p.org(ctx, req.OrgID)
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	if !org.GetLoginPolicy().GetAllowExternalIdp() {
		p.messagePage(w, r, lang, http.StatusForbidden, "err.idpNotAllowed")
		return
	}
	res, err := p.Directory.GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: req.OrgID, IdpId: idpID})
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument ||
		(err == nil && !res.GetIdp().GetActive()):
		p.messagePage(w, r, lang, http.StatusBadRequest, "err.idpGone")
		return
	case err != nil:
		p.internal(w, r, lang, err)
		return
	}
	idp := res.GetIdp()
	start, err := p.RP.Begin(ctx, idp, res.GetClientSecret())
	if err != nil {
		p.Logger.WarnContext(ctx, "identity provider unavailable", "idp_id", idp.GetId(), "err", err)
		p.messagePage(w, r, lang, http.StatusBadGateway, "err.idpUnavailable")
		return
	}
	if err := p.Store.CreateIdPFlow(ctx, session.IdPFlow{
		StateHash: session.HashState(start.State), UserAgentID: ua.ID, AuthRequestID: ar.ID, IdPID: idp.GetId(),
		OrgID: req.OrgID, Nonce: start.Nonce, Verifier: start.Verifier, ExpiresAt: ar.ExpiresAt,
	}); err != nil {
		p.internal(w, r, lang, err)
		return
	}
	http.Redirect(w, r, start.URL, http.StatusSeeOther)
}

// callback is /idps/callback: the identity provider's answer. The state
// must be one this browser started and not yet used; then the code is
// exchanged and the identity signs its user in.
func (p *Pages) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("Cache-Control", "no-store")
	lang := Language(nil, r.Header.Get("Accept-Language"))
	ua, err := p.Browsers.Find(ctx, r)
	if errors.Is(err, session.ErrNotFound) {
		p.messagePage(w, r, lang, http.StatusBadRequest, "err.cookie")
		return
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	q := r.URL.Query()
	fl, err := p.Store.TakeIdPFlow(ctx, q.Get("state"), ua.ID, p.Now())
	if errors.Is(err, session.ErrNotFound) {
		// Unknown, expired, of another browser, or replayed.
		p.messagePage(w, r, lang, http.StatusBadRequest, "err.idpState")
		return
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	req, ar, err := p.Flow.Load(ctx, fl.AuthRequestID, ua.ID)
	if errors.Is(err, session.ErrNotFound) {
		p.messagePage(w, r, lang, http.StatusNotFound, "err.request")
		return
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	f := &flow{ua: ua, req: req, ar: ar, lang: Language(req.UILocales, r.Header.Get("Accept-Language"))}
	// From here the client's redirect_uri is known: a failure at the
	// identity provider goes back to the client, which ends the request.
	failClient := func(code, msg string) {
		if err := p.Store.ConsumeAuthRequest(ctx, ar.ID); err != nil && !errors.Is(err, session.ErrNotFound) {
			p.internal(w, r, f.lang, err)
			return
		}
		p.Flow.Fail(w, r, req.UILocales, req.Fail(code, "%s", msg))
	}
	if e := q.Get("error"); e != "" {
		if e == "access_denied" {
			failClient(oauth.AccessDenied, "the sign-in was cancelled at the identity provider")
		} else {
			failClient(oauth.ServerError, "the identity provider answered with an error")
		}
		return
	}
	res, err := p.Directory.GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: fl.OrgID, IdpId: fl.IdPID})
	if connect.CodeOf(err) == connect.CodeNotFound || (err == nil && !res.GetIdp().GetActive()) {
		// Deactivated or removed while the user was away.
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.idpGone")
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	idp := res.GetIdp()
	id, err := p.RP.Finish(ctx, idp, res.GetClientSecret(), q, fl.Verifier, fl.Nonce)
	if err != nil {
		p.Logger.WarnContext(ctx, "sign-in at an identity provider failed", "idp_id", idp.GetId(), "err", err)
		failClient(oauth.ServerError, "the sign-in at the identity provider failed")
		return
	}
	p.signInIdentity(w, r, f, idp, id)
}

// signInIdentity signs in the user linked to id, registering one when the
// identity provider allows it.
func (p *Pages) signInIdentity(w http.ResponseWriter, r *http.Request, f *flow, idp *directoryv1.IdP, id *federation.Identity) {
	ctx := r.Context()
	// The issuer the identity was verified against: directory refuses it
	// once the provider names another (repointed while the user was away).
	linked, err := p.Directory.GetLinkedUser(ctx, &directoryv1.GetLinkedUserRequest{
		IdpId: idp.GetId(), ExternalSubject: id.Subject, Issuer: idp.GetIssuer()})
	switch {
	case err == nil:
		u := linked.GetUser()
		if u.GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
			p.messagePage(w, r, f.lang, http.StatusForbidden, "err.inactive")
			return
		}
		if id.EmailVerified && id.Email != "" && strings.EqualFold(id.Email, u.GetEmail()) &&
			(!u.GetEmailVerified() || idp.GetTrustAmr() && !u.GetEmailProven()) {
			// The provider vouches for the user's address, and that adds
			// to what is recorded (otherwise no call: most federated
			// sign-ins): the directory decides how far it counts.
			res, err := p.Directory.ConfirmLinkedEmail(ctx, &directoryv1.ConfirmLinkedEmailRequest{IdpId: idp.GetId(),
				ExternalSubject: id.Subject, Issuer: idp.GetIssuer(), Email: id.Email})
			if err != nil {
				p.internal(w, r, f.lang, err)
				return
			}
			u.EmailVerified = res.GetVerified()
		}
		p.signInLinked(w, r, f, u, federation.AMR(idp, id))
		return
	case connect.CodeOf(err) == connect.CodeFailedPrecondition:
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.idpGone")
		return
	case connect.CodeOf(err) != connect.CodeNotFound:
		p.internal(w, r, f.lang, err)
		return
	}
	if !idp.GetAutoRegister() {
		p.parkIdentity(w, r, f, idp, id, false)
		return
	}
	first, last := id.GivenName, id.FamilyName
	if first == "" && last == "" {
		first, last, _ = strings.Cut(federation.DisplayName(idp, id), " ")
	}
	reg, err := p.Directory.RegisterExternalUser(ctx, &directoryv1.RegisterExternalUserRequest{
		IdpId: idp.GetId(), ExternalSubject: id.Subject, ExternalUserName: providedName(id), UserName: federation.UserName(idp, id),
		DisplayName: federation.DisplayName(idp, id),
		FirstName:   first, LastName: last, Email: id.Email, EmailVerified: id.EmailVerified, PreferredLanguage: f.lang,
		Issuer: idp.GetIssuer(),
	})
	if err == nil {
		p.afterFirstFactor(w, r, f, reg.GetUser(), federation.AMR(idp, id), nil, nil, false)
		return
	}
	switch connect.CodeOf(err) {
	case connect.CodeFailedPrecondition:
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.idpGone")
	case connect.CodeAlreadyExists:
		// The user name is taken: perhaps by this very person, who may
		// link the identity by signing in to that account.
		p.parkIdentity(w, r, f, idp, id, true)
	case connect.CodeInvalidArgument:
		// The claims do not make an account (no e-mail, say): the user
		// links an existing one, or completes the registration form.
		p.parkIdentity(w, r, f, idp, id, false)
	default:
		p.internal(w, r, f.lang, err)
	}
}

// signInLinked signs in the user of a linked identity, through the same
// steps as a password sign-in: a password an admin set must be changed
// first (the change asks for it, so a link does not outlive the reset of
// the password that made it).
func (p *Pages) signInLinked(w http.ResponseWriter, r *http.Request, f *flow, u *directoryv1.User, amr []string) {
	if u.GetPasswordChangeRequired() {
		if err := p.Store.SetAuthRequestUser(r.Context(), f.ar.ID, u.GetPreferredLoginName(), u.GetId()); err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		redirect(w, r, PathChangePassword, f.ar.ID)
		return
	}
	p.afterFirstFactor(w, r, f, u, amr, nil, nil, false)
}

// parked is an identity waiting with its pending request.
type parked struct {
	IdPID   string `json:"idp_id"`
	IdPName string `json:"idp_name"`
	// Issuer and AMR: what the identity was verified against, and the
	// authentication methods Gatehouse records for it.
	Issuer   string              `json:"issuer"`
	AMR      []string            `json:"amr"`
	Identity federation.Identity `json:"identity"`
	UserName string              `json:"user_name"` // by the IdP's mapping
	Taken    bool                `json:"taken"`     // the mapped name belongs to another user
}

// parkIdentity keeps id with the pending request and shows the page that
// links it to an existing account or registers a new one.
func (p *Pages) parkIdentity(w http.ResponseWriter, r *http.Request, f *flow, idp *directoryv1.IdP, id *federation.Identity, taken bool) {
	raw, err := json.Marshal(parked{IdPID: idp.GetId(), IdPName: idp.GetName(), Issuer: idp.GetIssuer(), AMR: federation.AMR(idp, id),
		Identity: *id, UserName: federation.UserName(idp, id), Taken: taken})
	if err == nil {
		err = p.Store.SetAuthRequestExternal(r.Context(), f.ar.ID, string(raw))
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	redirect(w, r, PathIdPLink, f.ar.ID)
}

// parkedOf returns the identity parked with the flow's request.
func parkedOf(f *flow) (*parked, bool) {
	var pk parked
	if f.ar.External == "" || json.Unmarshal([]byte(f.ar.External), &pk) != nil || pk.Identity.Subject == "" {
		return nil, false
	}
	return &pk, true
}

// linkPage renders the choice for a parked identity: sign in to an
// existing account to link it, or (where the login policy allows
// registration) create an account prefilled from the claims.
func (p *Pages) linkPage(w http.ResponseWriter, r *http.Request, f *flow, pk *parked, status int, pg *page) {
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return
	}
	pg.AppName = pk.IdPName
	pg.External = &externalAccount{Name: pk.Identity.Name, Email: pk.Identity.Email, Subject: pk.Identity.Subject, Issuer: pk.Issuer}
	if pg.External.Name == "" {
		pg.External.Name = pk.Identity.PreferredUsername
	}
	pg.AllowRegister = lp.GetAllowRegister() && !pk.Taken
	pg.Taken = pk.Taken
	if pg.Form["userName"] == "" && pg.Form["email"] == "" {
		pg.Form["userName"], pg.Form["firstName"], pg.Form["lastName"], pg.Form["email"] =
			pk.UserName, pk.Identity.GivenName, pk.Identity.FamilyName, pk.Identity.Email
	}
	p.tmpl.render(w, p.Logger, status, "idplink", pg)
}

func (p *Pages) idpLinkPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	pk, ok := parkedOf(f)
	if !ok {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	p.linkPage(w, r, f, pk, http.StatusOK, f.page("idplink.title"))
}

// idpLinkSubmit links the parked identity to the account whose password
// the user gives, then signs that user in.
func (p *Pages) idpLinkSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "loginName", "password", "confirm")
	if f == nil {
		return
	}
	pk, ok := parkedOf(f)
	if !ok {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	ctx := r.Context()
	pg := f.page("idplink.title")
	pg.LoginName = strings.TrimSpace(f.form["loginName"])
	if pg.LoginName == "" || f.form["password"] == "" {
		pg.Errors["password"] = translate(f.lang, "err.required")
		p.linkPage(w, r, f, pk, http.StatusBadRequest, pg)
		return
	}
	// Linking hands the identity this account: the person says so, with
	// the identity in view. A page can walk a victim's browser through
	// the provider (signed in there as the attacker) to this form; the
	// victim, who would type a password anywhere, must see whose identity
	// it is and agree.
	if f.form["confirm"] != "yes" {
		pg.Errors["confirm"] = translate(f.lang, "err.confirmLink")
		p.linkPage(w, r, f, pk, http.StatusBadRequest, pg)
		return
	}
	resp, err := p.Directory.VerifyPassword(ctx, &directoryv1.VerifyPasswordRequest{
		OrgId: f.req.OrgID, LoginName: pg.LoginName, Password: f.form["password"], ClientAddress: clientAddress(r)})
	if key, status, ok := passwordError(err); ok {
		pg.Errors["password"] = translate(f.lang, key)
		p.linkPage(w, r, f, pk, status, pg)
		return
	} else if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	u := resp.GetUser()
	if _, err := p.Directory.LinkExternalUser(ctx, &directoryv1.LinkExternalUserRequest{
		IdpId: pk.IdPID, ExternalSubject: pk.Identity.Subject, UserId: u.GetId(), ExternalUserName: providedName(&pk.Identity),
		Issuer: pk.Issuer}); err != nil {
		if c := connect.CodeOf(err); c == connect.CodeAlreadyExists || c == connect.CodeFailedPrecondition {
			p.messagePage(w, r, f.lang, http.StatusConflict, "err.idpLinkRefused")
			return
		}
		p.internal(w, r, f.lang, err)
		return
	}
	// The password was just proven; one an admin set is changed first.
	if resp.GetChangeRequired() {
		if err := p.Store.SetAuthRequestUser(ctx, f.ar.ID, u.GetPreferredLoginName(), u.GetId()); err != nil {
			p.internal(w, r, f.lang, err)
			return
		}
		redirect(w, r, PathChangePassword, f.ar.ID)
		return
	}
	p.afterFirstFactor(w, r, f, u, []string{oauth.AMRPassword}, resp.GetLoginPolicy(), resp.GetSecondFactors(), true)
}

// idpRegisterSubmit registers a new account for the parked identity with
// the fields the user checked, where the login policy allows registration.
func (p *Pages) idpRegisterSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "userName", "firstName", "lastName", "email")
	if f == nil {
		return
	}
	pk, ok := parkedOf(f)
	if !ok {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	lp, ok := p.loginPolicy(w, r, f)
	if !ok {
		return
	}
	if !lp.GetAllowRegister() || pk.Taken {
		p.messagePage(w, r, f.lang, http.StatusForbidden, "err.registerDisabled")
		return
	}
	pg := f.page("idplink.title")
	for _, k := range []string{"userName", "firstName", "lastName", "email"} {
		pg.Form[k] = strings.TrimSpace(f.form[k])
	}
	// The e-mail counts as verified only when it is the one the provider
	// verified.
	verified := pk.Identity.EmailVerified && strings.EqualFold(pg.Form["email"], pk.Identity.Email)
	reg, err := p.Directory.RegisterExternalUser(r.Context(), &directoryv1.RegisterExternalUserRequest{
		IdpId: pk.IdPID, ExternalSubject: pk.Identity.Subject, ExternalUserName: providedName(&pk.Identity),
		UserName: pg.Form["userName"], FirstName: pg.Form["firstName"], LastName: pg.Form["lastName"],
		Email: pg.Form["email"], EmailVerified: verified, PreferredLanguage: f.lang, Issuer: pk.Issuer,
	})
	if err == nil {
		p.afterFirstFactor(w, r, f, reg.GetUser(), pk.AMR, nil, nil, false)
		return
	}
	switch connect.CodeOf(err) {
	case connect.CodeFailedPrecondition: // deactivated or repointed meanwhile
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.idpGone")
	case connect.CodeAlreadyExists:
		pg.Errors["userName"] = translate(f.lang, "err.taken")
		p.linkPage(w, r, f, pk, http.StatusConflict, pg)
	case connect.CodeInvalidArgument:
		msg := ""
		if ce := new(connect.Error); errors.As(err, &ce) {
			msg = ce.Message()
		}
		pg.Error = translate(f.lang, "err.invalid", msg)
		p.linkPage(w, r, f, pk, http.StatusBadRequest, pg)
	default:
		p.internal(w, r, f.lang, err)
	}
}

// providedName is the user name the identity provider gave, as shown in
// ListUserIDPs.
func providedName(id *federation.Identity) string {
	if id.PreferredUsername != "" {
		return id.PreferredUsername
	}
	return id.Email
}
