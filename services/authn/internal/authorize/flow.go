package authorize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Path is the authorization endpoint.
const Path = "/oauth/v2/authorize"

// Login page paths (served by package login), each taking the pending
// request's id in the authRequestID query parameter.
const (
	PathLogin    = "/ui/login/login"
	PathPassword = "/ui/login/password"
	PathSelect   = "/ui/login/select"
	PathRegister = "/ui/login/register"
	PathConsent  = "/ui/login/consent"
)

// RequestParam carries a pending request's id in the login page URLs.
const RequestParam = "authRequestID"

// PageURL is a login page for a pending request.
func PageURL(path, requestID string) string {
	return path + "?" + url.Values{RequestParam: {requestID}}.Encode()
}

// ErrorPage renders an error on Gatehouse itself.
type ErrorPage func(w http.ResponseWriter, r *http.Request, locales []string, status int, err *oauth.Error)

// Flow runs an authorization request from the endpoint to its answer; the
// login pages use it to load the pending request and to finish it.
type Flow struct {
	Validator  *Validator
	Directory  Directory
	Tokens     Tokens
	Store      *session.Store
	Browsers   *session.Browsers
	RequestTTL time.Duration
	ErrorPage  ErrorPage
	// StartIdP sends the browser to an identity provider for a pending
	// request (the shortcut scope); the login pages implement it.
	StartIdP func(w http.ResponseWriter, r *http.Request, ua session.UserAgent, ar session.AuthRequest, req *Request, idpID string)
	Now      func() time.Time
	Logger   *slog.Logger
}

// ServeHTTP is the authorization endpoint, GET and form POST.
func (f *Flow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx := r.Context()
	p, err := ParseParams(r)
	if err != nil {
		f.Fail(w, r, nil, &Failure{Err: oauth.As(err)})
		return
	}
	req, fail := f.Validator.Validate(ctx, p)
	if fail != nil {
		f.Fail(w, r, p.Locales(), fail)
		return
	}
	f.Run(w, r, req)
}

// Run answers a validated request: with a session of the browser that
// may answer it, or through the login pages.
func (f *Flow) Run(w http.ResponseWriter, r *http.Request, req *Request) {
	ctx := r.Context()
	req.StartedAt = f.Now()
	var (
		ua  session.UserAgent
		err error
	)
	if req.HasPrompt(PromptNone) {
		// No page follows, so a browser without a cookie gets none.
		ua, err = f.Browsers.Find(ctx, r)
		if errors.Is(err, session.ErrNotFound) {
			f.Fail(w, r, req.UILocales, req.Fail(oauth.LoginRequired, "the user is not signed in"))
			return
		}
	} else {
		ua, err = f.Browsers.Ensure(ctx, w, r)
	}
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	live, expired, err := f.sessions(ctx, ua.ID)
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	d := Decide(req, live, expired, f.Now())
	switch d.Step {
	case StepFail:
		f.Fail(w, r, req.UILocales, &Failure{Err: d.Err, Target: req.Target()})
		return
	case StepComplete:
		f.complete(w, r, req, *d.Session, false)
		return
	}
	loginName, userID := d.LoginName, ""
	if d.Session != nil {
		loginName, userID = d.Session.LoginName, d.Session.UserID
	}
	pending, err := f.park(ctx, req, ua.ID, loginName, userID)
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	if req.IdPID != "" && f.StartIdP != nil {
		// urn:gatehouse:iam:org:idp:id:{id} skips the login page.
		f.StartIdP(w, r, ua, pending, req, req.IdPID)
		return
	}
	path := PathLogin
	switch d.Step {
	case StepPassword:
		path = PathPassword
	case StepSelect:
		path = PathSelect
	case StepRegister:
		path = PathRegister
	}
	http.Redirect(w, r, PageURL(path, pending.ID), http.StatusFound)
}

// Sessions returns the browser's live sessions that still stand: their
// users exist and are active, and no admin ended them since they
// authenticated.
func (f *Flow) Sessions(ctx context.Context, userAgentID string) ([]session.Session, error) {
	live, _, err := f.sessions(ctx, userAgentID)
	return live, err
}

// sessions returns the browser's live sessions that still stand (see
// Sessions) and its expired ones (see session.Store.Sessions).
func (f *Flow) sessions(ctx context.Context, userAgentID string) (live, expired []session.Session, err error) {
	all, expired, err := f.Store.Sessions(ctx, userAgentID, f.Now())
	if err != nil {
		return nil, nil, err
	}
	live = all[:0]
	for _, s := range all {
		ok, err := f.SessionValid(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			live = append(live, s)
		}
	}
	return live, expired, nil
}

// Park stores req (the account page's AccountRequest) for the browser
// and returns the login page's URL to continue at.
func (f *Flow) Park(ctx context.Context, req *Request, userAgentID string) (string, error) {
	pending, err := f.park(ctx, req, userAgentID, "", "")
	if err != nil {
		return "", err
	}
	return PageURL(PathLogin, pending.ID), nil
}

// park stores req as a request of the browser userAgentID waiting for a
// login; loginName and userID name who is expected to sign in, if known.
func (f *Flow) park(ctx context.Context, req *Request, userAgentID, loginName, userID string) (session.AuthRequest, error) {
	return f.parkWith(ctx, req, userAgentID, loginName, userID, "")
}

// parkWith is park with the first factor the user passed already
// (FirstFactor's encoding, or "").
func (f *Flow) parkWith(ctx context.Context, req *Request, userAgentID, loginName, userID, firstFactor string) (session.AuthRequest, error) {
	now := f.Now()
	pending := session.AuthRequest{ID: secrets.RandomToken(32), UserAgentID: userAgentID, LoginName: loginName, UserID: userID,
		FirstFactor: firstFactor, CreatedAt: now, ExpiresAt: now.Add(f.RequestTTL)}
	params, err := json.Marshal(req)
	if err != nil {
		return session.AuthRequest{}, err
	}
	pending.Params = params
	return pending, f.Store.CreateAuthRequest(ctx, pending)
}

// SessionValid reports whether s's user exists and is active, and s
// authenticated after the user's sessions were last ended (an admin
// password reset ends them: sessions_not_before).
func (f *Flow) SessionValid(ctx context.Context, s session.Session) (bool, error) {
	resp, err := f.Directory.GetUser(ctx, &directoryv1.GetUserRequest{UserId: s.UserID})
	if connect.CodeOf(err) == connect.CodeNotFound {
		return false, nil
	}
	if err != nil {
		return false, dependencyError("directory", err)
	}
	u := resp.GetUser()
	if nb := u.GetSessionsNotBefore(); nb != nil && !s.AuthTime.After(nb.AsTime()) {
		return false, nil
	}
	return u.GetState() == directoryv1.UserState_USER_STATE_ACTIVE, nil
}

// Load returns a pending request of the browser, or ErrNotFound.
func (f *Flow) Load(ctx context.Context, id, userAgentID string) (*Request, session.AuthRequest, error) {
	ar, err := f.Store.AuthRequest(ctx, id, userAgentID, f.Now())
	if err != nil {
		return nil, session.AuthRequest{}, err
	}
	var req Request
	if err := json.Unmarshal(ar.Params, &req); err != nil {
		return nil, session.AuthRequest{}, fmt.Errorf("auth request %s: %w", id, err)
	}
	return &req, ar, nil
}

// Finish answers a pending request with s, once: a second submission of
// the same request finds it consumed and gets the error page.
func (f *Flow) Finish(w http.ResponseWriter, r *http.Request, req *Request, ar session.AuthRequest, s session.Session) {
	if err := f.Store.ConsumeAuthRequest(r.Context(), ar.ID); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			f.Fail(w, r, req.UILocales, AlreadyCompleted())
			return
		}
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	f.complete(w, r, req, s, false)
}

// AlreadyCompleted is the failure of a pending request someone completed
// already (a form sent twice).
func AlreadyCompleted() *Failure {
	return &Failure{Err: oauth.New(oauth.InvalidRequest, "this login request was already completed")}
}

// FinishSignedIn answers req with s, a session the sign-in that consumed
// req's pending request has just created or renewed (session.Store.SignIn):
// as Finish, without recording activity the sign-in recorded already.
func (f *Flow) FinishSignedIn(w http.ResponseWriter, r *http.Request, req *Request, s session.Session) {
	f.complete(w, r, req, s, true)
}

// complete asks for consent or answers req with s; fresh is true when s
// was signed in by this very request (see answer).
func (f *Flow) complete(w http.ResponseWriter, r *http.Request, req *Request, s session.Session, fresh bool) {
	ctx := r.Context()
	if req.Account {
		f.answer(w, r, req, s, fresh) // no application: nothing to consent to
		return
	}
	if req.Device != nil {
		// A device is approved on a page, always: the person sees the
		// application and what it asks for, and the code was typed by
		// whoever holds it (RFC 8628 §5.4: remote phishing).
		f.askConsent(w, r, req, s)
		return
	}
	need, err := f.NeedsConsent(ctx, req, s)
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	if !need && !fresh && req.ConfirmsManagement() {
		// A management token is never issued to a session without the
		// person confirming it on a page (a sign-in on this very request
		// is one): anyone can present a public native client's id with a
		// loopback redirect of their own (RFC 8252 §8.6), and any page can
		// navigate a browser to a confidential one's request.
		need = true
	}
	if need {
		if req.HasPrompt(PromptNone) {
			f.Fail(w, r, req.UILocales, req.Fail(oauth.ConsentRequired, "the user has not consented to this application"))
			return
		}
		f.askConsent(w, r, req, s)
		return
	}
	f.answer(w, r, req, s, fresh)
}

// NeedsConsent reports whether s's user must consent before req is
// answered: prompt=consent asks always; a user of an organization the
// app's project is granted to (not the app's own, and not through an
// admin client) consents once per scope set.
func (f *Flow) NeedsConsent(ctx context.Context, req *Request, s session.Session) (bool, error) {
	if req.HasPrompt(PromptConsent) {
		return true, nil
	}
	if s.OrgID == req.ClientOrgID || req.AdminClient {
		return false, nil
	}
	ok, err := f.Store.Consented(ctx, s.UserID, req.ClientID, req.GrantIDs[s.OrgID], req.Scopes)
	return !ok, err
}

// askConsent parks req for s's user and sends the browser to the consent
// page.
func (f *Flow) askConsent(w http.ResponseWriter, r *http.Request, req *Request, s session.Session) {
	// The session's browser, not the request's cookie: a sign-in has just
	// given the browser a new identity whose cookie this request lacks.
	pending, err := f.park(r.Context(), req, s.UserAgentID, s.LoginName, s.UserID)
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	http.Redirect(w, r, PageURL(PathConsent, pending.ID), http.StatusFound)
}

// Answer sends req's code or tokens for s without further checks (the
// consent page calls it once the user agreed). Answering is s's activity
// (session.Store.Touch). A session that stopped being live since it was
// read (it expired, or a logout ended it) answers nothing: prompt=none
// gets login_required, any other request the login page for its account.
func (f *Flow) Answer(w http.ResponseWriter, r *http.Request, req *Request, s session.Session) {
	f.answer(w, r, req, s, false)
}

// answer is Answer; fresh skips recording the activity, which a sign-in
// that has just written the session at this moment recorded (the session
// is live: nothing else has seen its new browser identity yet).
func (f *Flow) answer(w http.ResponseWriter, r *http.Request, req *Request, s session.Session, fresh bool) {
	ctx := r.Context()
	if !fresh && NeedsLogin(req, s, f.Now()) {
		// Reached through a page that does not authenticate (account
		// selection, consent) while the request asks for a new login: the
		// sign-in of s's account, never the answer.
		if req.HasPrompt(PromptNone) {
			f.Fail(w, r, req.UILocales, req.Fail(oauth.LoginRequired, "the authentication is older than max_age"))
			return
		}
		f.signInAgain(w, r, req, s)
		return
	}
	if !fresh {
		// A session that never passed a second factor answers nothing
		// while the organization forces one or the request asks for it
		// (acr_values): the user passes it first.
		why, lapse, err := f.stepUp(ctx, req, s)
		if err != nil {
			f.Fail(w, r, req.UILocales, req.FailWith(err))
			return
		}
		if lapse != NoLapse && req.HasPrompt(PromptNone) {
			f.Fail(w, r, req.UILocales, req.Fail(oauth.LoginRequired, "a check of the session is older than the login policy allows"))
			return
		}
		switch {
		case lapse == LapseLogin:
			// The first factor is too old (the login policy's check
			// lifetime): the user signs in again.
			f.signInAgain(w, r, req, s)
			return
		case lapse == LapseSecondFactor:
			f.askSecondFactor(w, r, req, s, withoutSecondFactor(s.AMR))
			return
		case why != "":
			if req.HasPrompt(PromptNone) {
				f.Fail(w, r, req.UILocales, req.Fail(why, "the session lacks the second factor the request or the organization requires"))
				return
			}
			f.askSecondFactor(w, r, req, s, s.AMR)
			return
		}
	}
	var err error
	if !fresh {
		err = f.Store.Touch(ctx, s.ID, f.Now())
	}
	if errors.Is(err, session.ErrNotFound) {
		if req.HasPrompt(PromptNone) {
			f.Fail(w, r, req.UILocales, req.Fail(oauth.LoginRequired, "the session has ended"))
			return
		}
		pending, err := f.park(ctx, req, s.UserAgentID, s.LoginName, "")
		if err != nil {
			f.Fail(w, r, req.UILocales, req.FailWith(err))
			return
		}
		http.Redirect(w, r, PageURL(PathLogin, pending.ID), http.StatusFound)
		return
	} else if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	if req.Account {
		http.Redirect(w, r, PathAccount, http.StatusFound) // signed in: no code, no token
		return
	}
	to, fail := Complete(ctx, f.Tokens, req, s)
	if fail != nil {
		f.Fail(w, r, req.UILocales, fail)
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}

// signInAgain parks req for s's user to sign in again: the password page
// of a session that signed in with its password, else the login page
// (passkeys, external providers) with the name filled in.
func (f *Flow) signInAgain(w http.ResponseWriter, r *http.Request, req *Request, s session.Session) {
	path, userID := PathPassword, s.UserID
	if !slices.Contains(s.AMR, oauth.AMRPassword) {
		path, userID = PathLogin, ""
		req.LoginHint = s.LoginName
	}
	pending, err := f.park(r.Context(), req, s.UserAgentID, s.LoginName, userID)
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	http.Redirect(w, r, PageURL(path, pending.ID), http.StatusFound)
}

// Fail sends a failure to its redirect_uri, or renders the error page;
// it is logged at its own level with its cause, which is never sent.
func (f *Flow) Fail(w http.ResponseWriter, r *http.Request, locales []string, fail *Failure) {
	fail.Err.Log(r.Context(), f.Logger, "authorization request")
	if fail.Target == nil {
		f.ErrorPage(w, r, locales, fail.Status(), fail.Err)
		return
	}
	http.Redirect(w, r, fail.RedirectURL(), http.StatusFound)
}
