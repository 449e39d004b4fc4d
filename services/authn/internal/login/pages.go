package login

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Directory is what the login pages need of the directory.
type Directory interface {
	VerifyPassword(context.Context, *directoryv1.VerifyPasswordRequest) (*directoryv1.VerifyPasswordResponse, error)
	ChangePassword(context.Context, *directoryv1.ChangePasswordRequest) (*directoryv1.ChangePasswordResponse, error)
	GetOrg(context.Context, *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error)
	GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error)
	RegisterUser(context.Context, *directoryv1.RegisterUserRequest) (*directoryv1.RegisterUserResponse, error)
	LookupUser(context.Context, *directoryv1.LookupUserRequest) (*directoryv1.LookupUserResponse, error)
	GetIdP(context.Context, *directoryv1.GetIdPRequest) (*directoryv1.GetIdPResponse, error)
	ListIdPs(context.Context, *directoryv1.ListIdPsRequest) (*directoryv1.ListIdPsResponse, error)
	GetLinkedUser(context.Context, *directoryv1.GetLinkedUserRequest) (*directoryv1.GetLinkedUserResponse, error)
	RegisterExternalUser(context.Context, *directoryv1.RegisterExternalUserRequest) (*directoryv1.RegisterExternalUserResponse, error)
	LinkExternalUser(context.Context, *directoryv1.LinkExternalUserRequest) (*directoryv1.LinkExternalUserResponse, error)
	GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error)
	ListAuthFactors(context.Context, *directoryv1.ListAuthFactorsRequest) (*directoryv1.ListAuthFactorsResponse, error)
	CheckAuthFactor(context.Context, *directoryv1.CheckAuthFactorRequest) (*directoryv1.CheckAuthFactorResponse, error)
	StartTOTP(context.Context, *directoryv1.StartTOTPRequest) (*directoryv1.StartTOTPResponse, error)
	VerifyTOTP(context.Context, *directoryv1.VerifyTOTPRequest) (*directoryv1.VerifyTOTPResponse, error)
	GenerateRecoveryCodes(context.Context, *directoryv1.GenerateRecoveryCodesRequest) (*directoryv1.GenerateRecoveryCodesResponse, error)
	StartWebAuthnLogin(context.Context, *directoryv1.StartWebAuthnLoginRequest) (*directoryv1.StartWebAuthnLoginResponse, error)
	CheckWebAuthnLogin(context.Context, *directoryv1.CheckWebAuthnLoginRequest) (*directoryv1.CheckWebAuthnLoginResponse, error)
	StartWebAuthnRegistration(context.Context, *directoryv1.StartWebAuthnRegistrationRequest) (*directoryv1.StartWebAuthnRegistrationResponse, error)
	VerifyWebAuthnRegistration(context.Context, *directoryv1.VerifyWebAuthnRegistrationRequest) (*directoryv1.VerifyWebAuthnRegistrationResponse, error)
	GetAccount(context.Context, *directoryv1.GetAccountRequest) (*directoryv1.GetAccountResponse, error)
	RemoveAccountFactor(context.Context, *directoryv1.RemoveAccountFactorRequest) (*directoryv1.RemoveAccountFactorResponse, error)
	UnlinkAccount(context.Context, *directoryv1.UnlinkAccountRequest) (*directoryv1.UnlinkAccountResponse, error)
	EndUserSessions(context.Context, *directoryv1.EndUserSessionsRequest) (*directoryv1.EndUserSessionsResponse, error)
	RequestPasswordReset(context.Context, *directoryv1.RequestPasswordResetRequest) (*directoryv1.RequestPasswordResetResponse, error)
	CheckPasswordResetCode(context.Context, *directoryv1.CheckPasswordResetCodeRequest) (*directoryv1.CheckPasswordResetCodeResponse, error)
	ResetPassword(context.Context, *directoryv1.ResetPasswordRequest) (*directoryv1.ResetPasswordResponse, error)
	CheckUserCode(context.Context, *directoryv1.CheckUserCodeRequest) (*directoryv1.CheckUserCodeResponse, error)
	VerifyEmailCode(context.Context, *directoryv1.VerifyEmailCodeRequest) (*directoryv1.VerifyEmailCodeResponse, error)
	InitializeUser(context.Context, *directoryv1.InitializeUserRequest) (*directoryv1.InitializeUserResponse, error)
	SendEmailCode(context.Context, *directoryv1.SendEmailCodeRequest) (*directoryv1.SendEmailCodeResponse, error)
	ConfirmLinkedEmail(context.Context, *directoryv1.ConfirmLinkedEmailRequest) (*directoryv1.ConfirmLinkedEmailResponse, error)
}

// Paths served besides the authorize package's page paths.
const (
	PathChangePassword = "/ui/login/password/change"
	PathLoggedOut      = "/ui/login/logout/done"
	PathStyle          = "/ui/login/resources/style.css"
	PathScript         = "/ui/login/resources/webauthn.js"
	// PathPasskey signs in with a passkey, without a password.
	PathPasskey = "/ui/login/passkey"
)

// Pages serves the login pages.
type Pages struct {
	Flow      *authorize.Flow
	Directory Directory
	Store     *session.Store
	Browsers  *session.Browsers
	// RP signs users in through external identity providers (nil: no
	// buttons).
	RP Federation
	// WebAuthn: security keys and passkeys work (the issuer's host is a
	// name, not an IP address, which WebAuthn does not accept).
	WebAuthn bool
	// StateKey seals the code page's state (codestate.go); nil keeps it
	// in the pending request only.
	StateKey *secrets.Cipher
	Now      func() time.Time
	Logger   *slog.Logger
	tmpl     templates
	code     *codePages
}

// New parses the templates; it fails only on a broken build.
func New(p Pages) (*Pages, error) {
	t, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	p.tmpl, p.code = t, newCodePages(t)
	return &p, nil
}

// Register mounts the pages on mux.
func (p *Pages) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+authorize.PathLogin, p.loginNamePage)
	mux.HandleFunc("POST "+authorize.PathLogin, p.loginNameSubmit)
	mux.HandleFunc("GET "+authorize.PathPassword, p.passwordPage)
	mux.HandleFunc("POST "+authorize.PathPassword, p.passwordSubmit)
	mux.HandleFunc("GET "+PathChangePassword, p.changePage)
	mux.HandleFunc("POST "+PathChangePassword, p.changeSubmit)
	mux.HandleFunc("GET "+authorize.PathMFA, p.mfaPage)
	mux.HandleFunc("POST "+authorize.PathMFA, p.mfaSubmit)
	mux.HandleFunc("GET "+authorize.PathMFAInit, p.mfaInitPage)
	mux.HandleFunc("POST "+authorize.PathMFAInit, p.mfaInitSubmit)
	mux.HandleFunc("GET "+authorize.PathSelect, p.selectPage)
	mux.HandleFunc("POST "+authorize.PathSelect, p.selectSubmit)
	mux.HandleFunc("GET "+authorize.PathRegister, p.registerPage)
	mux.HandleFunc("POST "+authorize.PathRegister, p.registerSubmit)
	mux.HandleFunc("POST "+PathIdP, p.idpSubmit)
	mux.HandleFunc("GET "+PathIdPCallback, p.callback)
	mux.HandleFunc("GET "+PathIdPLink, p.idpLinkPage)
	mux.HandleFunc("POST "+PathIdPLink, p.idpLinkSubmit)
	mux.HandleFunc("POST "+PathIdPLinkRegister, p.idpRegisterSubmit)
	mux.HandleFunc("GET "+authorize.PathDevice, p.devicePage)
	mux.HandleFunc("POST "+authorize.PathDevice, p.deviceSubmit)
	mux.HandleFunc("GET "+authorize.PathDeviceDone, p.deviceDone)
	mux.HandleFunc("GET "+authorize.PathConsent, p.consentPage)
	mux.HandleFunc("POST "+authorize.PathConsent, p.consentSubmit)
	mux.HandleFunc("GET "+PathLoggedOut, func(w http.ResponseWriter, r *http.Request) {
		p.LoggedOut(w, r, nil)
	})
	p.registerAccount(mux)
	p.registerReset(mux)
	p.registerEmail(mux)
	mux.HandleFunc("GET "+PathPasskey, p.passkeyPage)
	mux.HandleFunc("POST "+PathPasskey, p.passkeySubmit)
	mux.HandleFunc("GET "+PathScript, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(webauthnJS)
	})
	mux.HandleFunc("GET "+PathStyle, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(styleCSS)
	})
}

// ErrorPage renders an error on Gatehouse itself (authorize.ErrorPage).
func (p *Pages) ErrorPage(w http.ResponseWriter, r *http.Request, locales []string, status int, err *oauth.Error) {
	lang := Language(locales, r.Header.Get("Accept-Language"))
	pg := &page{Lang: lang, Title: "error.title", Code: err.Code, Detail: err.Description, Hint: err.Hint}
	switch err.Code {
	case oauth.ServerError:
		pg.Error, pg.Detail = translate(lang, "err.server"), ""
	case oauth.TemporarilyUnavailable:
		pg.Error, pg.Detail = translate(lang, "err.unavailable"), ""
		w.Header().Set("Retry-After", "5")
		telemetry.Unavailable(r.Context(), "login")
	default:
		// The description is technical English; a translated sentence
		// leads, the description follows for the application's developer.
		if _, ok := messages["en"]["error."+err.Code]; ok {
			pg.Error = translate(lang, "error."+err.Code)
		} else {
			pg.Error, pg.Detail = err.Description, ""
		}
	}
	p.tmpl.render(w, p.Logger, status, "error", pg)
}

// messagePage renders the error page with a translated message.
func (p *Pages) messagePage(w http.ResponseWriter, r *http.Request, lang string, status int, key string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
		telemetry.Unavailable(r.Context(), "login")
	}
	p.tmpl.render(w, p.Logger, status, "error", &page{Lang: lang, Title: "error.title", Error: translate(lang, key)})
}

// LoggedOut renders the logged-out page.
func (p *Pages) LoggedOut(w http.ResponseWriter, r *http.Request, locales []string) {
	if locales == nil {
		locales = []string{r.URL.Query().Get("ui_locales")}
	}
	lang := Language(locales, r.Header.Get("Accept-Language"))
	p.tmpl.render(w, p.Logger, http.StatusOK, "loggedout", &page{Lang: lang, Title: "loggedout.title"})
}

// ConfirmLogout renders the logout confirmation (endsession.Handler's
// Confirm): a form that posts fields and the browser's CSRF token back to
// the end-session endpoint, listing the accounts that will be signed out.
func (p *Pages) ConfirmLogout(w http.ResponseWriter, r *http.Request, locales []string, csrf string, fields url.Values, sessions []session.Session) {
	lang := Language(locales, r.Header.Get("Accept-Language"))
	pg := &page{Lang: lang, Title: "logout.title", CSRF: csrf, Form: map[string]string{}, Sessions: sessions}
	for k := range fields {
		pg.Form[k] = fields.Get(k)
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "logout", pg)
}

// flow is one step of a pending request: who, what, in which language.
type flow struct {
	ua  session.UserAgent
	req *authorize.Request
	ar  session.AuthRequest
	// form holds a POST's fields (after the CSRF check).
	form map[string]string
	lang string
}

func (f *flow) page(title string) *page {
	return &page{Lang: f.lang, Title: title, RequestID: f.ar.ID, CSRF: f.ua.CSRFToken, AppName: f.req.AppName,
		LoginName: f.ar.LoginName, Errors: map[string]string{}, Form: map[string]string{}}
}

// load reads the pending request a page belongs to; on a POST it parses
// the form once and checks its CSRF token against the browser's. On
// failure it has written the error page and returns nil.
func (p *Pages) load(w http.ResponseWriter, r *http.Request, fields ...string) *flow {
	v := p.visit(w, r, fields...)
	if v == nil {
		return nil
	}
	return p.loadFor(w, r, v)
}

// visitor is a page request's browser, after load's checks: the request
// id it names, and on a POST the form.
type visitor struct {
	ua   session.UserAgent
	id   string
	form map[string]string
	lang string // from Accept-Language only
}

// visit is load's first half: the browser, and on a POST its form and
// CSRF token; no pending request is read.
func (p *Pages) visit(w http.ResponseWriter, r *http.Request, fields ...string) *visitor {
	lang := Language(nil, r.Header.Get("Accept-Language"))
	id := r.URL.Query().Get(authorize.RequestParam)
	var form map[string]string
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			p.messagePage(w, r, lang, http.StatusBadRequest, "err.request")
			return nil
		}
		form = map[string]string{}
		for _, k := range append(fields, "csrf", authorize.RequestParam) {
			form[k] = r.PostForm.Get(k)
		}
		id = form[authorize.RequestParam]
	}
	ua, err := p.Browsers.Find(r.Context(), r)
	if errors.Is(err, session.ErrNotFound) {
		p.messagePage(w, r, lang, http.StatusBadRequest, "err.cookie")
		return nil
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return nil
	}
	if form != nil && subtle.ConstantTimeCompare([]byte(form["csrf"]), []byte(ua.CSRFToken)) != 1 {
		p.messagePage(w, r, lang, http.StatusForbidden, "err.csrf")
		return nil
	}
	return &visitor{ua: ua, id: id, form: form, lang: lang}
}

// loadFor is load's second half: the pending request v names, of v's
// browser.
func (p *Pages) loadFor(w http.ResponseWriter, r *http.Request, v *visitor) *flow {
	req, ar, err := p.Flow.Load(r.Context(), v.id, v.ua.ID)
	if errors.Is(err, session.ErrNotFound) {
		p.messagePage(w, r, v.lang, http.StatusNotFound, "err.request")
		return nil
	}
	if err != nil {
		p.internal(w, r, v.lang, err)
		return nil
	}
	return &flow{ua: v.ua, req: req, ar: ar, form: v.form, lang: Language(req.UILocales, r.Header.Get("Accept-Language"))}
}

// internal logs err and renders the error page: 503 when a dependency is
// unavailable (retry), else 500.
func (p *Pages) internal(w http.ResponseWriter, r *http.Request, lang string, err error) {
	p.Logger.ErrorContext(r.Context(), "login page failed", "error", err)
	var oe *oauth.Error
	if c := connect.CodeOf(err); c == connect.CodeUnavailable || c == connect.CodeDeadlineExceeded || db.IsUnavailable(err) ||
		(errors.As(err, &oe) && oe.Code == oauth.TemporarilyUnavailable) {
		p.messagePage(w, r, lang, http.StatusServiceUnavailable, "err.unavailable")
		return
	}
	p.messagePage(w, r, lang, http.StatusInternalServerError, "err.server")
}

// signIn records the user's session on the browser, authenticated now by
// amr, and answers the pending request.
func (p *Pages) signIn(w http.ResponseWriter, r *http.Request, f *flow, u *directoryv1.User, amr []string) {
	p.signInChecked(w, r, f, u, amr, checksFor(amr, p.Now()))
}

// signInChecked is signIn recording the checks that ran (the session
// keeps its earlier times of the others).
func (p *Pages) signInChecked(w http.ResponseWriter, r *http.Request, f *flow, u *directoryv1.User, amr []string, checks session.Checks) {
	// A new browser identity at every sign-in: a cookie someone planted
	// before it (session fixation) names nothing afterwards. The session
	// and the pending request's consumption are in the same transaction.
	ua, s, err := p.Browsers.SignIn(r.Context(), w, f.ua, session.Session{
		UserID: u.GetId(), OrgID: u.GetOrgId(), LoginName: u.GetPreferredLoginName(),
		DisplayName: u.GetDisplayName(), AuthTime: p.Now(), AMR: amr, Checks: checks,
	}, f.ar.ID)
	if errors.Is(err, session.ErrNotFound) {
		p.Flow.Fail(w, r, f.req.UILocales, authorize.AlreadyCompleted())
		return
	}
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	f.ua = ua
	p.Flow.FinishSignedIn(w, r, f.req, s)
}

// clientAddress is the browser's address as edge reports it.
func clientAddress(r *http.Request) string { return r.Header.Get("X-Real-Ip") }

func redirect(w http.ResponseWriter, r *http.Request, path, id string) {
	http.Redirect(w, r, authorize.PageURL(path, id), http.StatusSeeOther)
}
