package endsession

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Path is the end-session endpoint.
const Path = "/oidc/v1/end_session"

// Directory is what logout needs of the directory.
type Directory interface {
	GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error)
}

// Tokens is what logout needs of the tokens service.
type Tokens interface {
	VerifyIDTokenHint(ctx context.Context, idToken string, allowExpired bool) (authorize.Hint, error)
	RevokeSession(ctx context.Context, sessionID string) error
}

// Handler serves the end-session endpoint.
type Handler struct {
	Directory Directory
	Tokens    Tokens
	Store     *session.Store
	Browsers  *session.Browsers
	ErrorPage authorize.ErrorPage
	LoggedOut func(w http.ResponseWriter, r *http.Request, locales []string)
	// Confirm renders the logout confirmation: a form that posts fields
	// and csrf back to Path. sessions are the browser's signed-in users.
	Confirm func(w http.ResponseWriter, r *http.Request, locales []string, csrf string, fields url.Values, sessions []session.Session)
	Now     func() time.Time
	Logger  *slog.Logger
}

// request is a parsed end-session request.
type request struct {
	idTokenHint, clientID, redirectURI, state, uiLocales string
	locales                                              []string
	// csrf is set when the request is the confirmation form's POST.
	csrf string
}

// fields are the parameters the confirmation form carries back.
func (q request) fields() url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"client_id": q.clientID, "post_logout_redirect_uri": q.redirectURI, "state": q.state, "ui_locales": q.uiLocales,
		"id_token_hint": q.idTokenHint} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v
}

func parse(r *http.Request) (request, error) {
	var v url.Values
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		v = r.URL.Query()
	case http.MethodPost:
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct != "application/x-www-form-urlencoded" {
			return request{}, oauth.New(oauth.InvalidRequest, "a POST must carry an application/x-www-form-urlencoded body")
		}
		r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			return request{}, oauth.New(oauth.InvalidRequest, "malformed form body").WithCause(err)
		}
		v = r.PostForm
	default:
		e := oauth.New(oauth.InvalidRequest, "method %s not allowed", r.Method)
		e.Status = http.StatusMethodNotAllowed
		return request{}, e
	}
	for _, k := range []string{"id_token_hint", "client_id", "post_logout_redirect_uri", "state", "ui_locales", "csrf"} {
		if len(v[k]) > 1 {
			return request{}, oauth.New(oauth.InvalidRequest, "parameter %s is repeated", k)
		}
	}
	q := request{idTokenHint: v.Get("id_token_hint"), clientID: v.Get("client_id"),
		redirectURI: v.Get("post_logout_redirect_uri"), state: v.Get("state"), uiLocales: v.Get("ui_locales")}
	q.locales = strings.Fields(q.uiLocales)
	if r.Method == http.MethodPost {
		// Only a form body confirms: a GET never logs out without a hint.
		q.csrf = v.Get("csrf")
	}
	return q, nil
}

// MaxHintAge bounds how long after its expiry an id_token_hint is still
// accepted at logout (RPs often log out with an expired ID token).
const MaxHintAge = 24 * time.Hour

// ServeHTTP ends sessions. A bad request (invalid hint, client_id that is
// not the hint's azp, repeated parameter) changes nothing and shows the
// error page. With a valid id_token_hint (expired at most MaxHintAge ago)
// the RP is identified and the hint's session ends at once when it is
// this browser's; a hinted session of no cookie or of another browser,
// like a request without a hint from a browser that holds sessions, is
// ended only after the user confirms (a cross-site GET or POST must not log users
// out): the confirmation page posts back with the browser's CSRF token,
// and only that POST ends every session of the browser; a wrong token is
// refused with 403. Ended sessions' tokens are revoked; then the browser
// goes to post_logout_redirect_uri with state when that URI is registered
// for the client exactly, else to the logged-out page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx := r.Context()
	req, err := parse(r)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	var hint *authorize.Hint
	if req.idTokenHint != "" {
		hv, err := h.Tokens.VerifyIDTokenHint(ctx, req.idTokenHint, true)
		if err != nil {
			if c := connect.CodeOf(err); c == connect.CodeInvalidArgument || c == connect.CodeUnauthenticated {
				err = oauth.New(oauth.InvalidRequest, "id_token_hint is not a valid ID token of this issuer").WithCause(err)
			}
			h.fail(w, r, req.locales, err)
			return
		}
		hint = &hv
	}
	clientID := req.clientID
	if hint != nil {
		if clientID != "" && clientID != hint.ClientID {
			h.fail(w, r, req.locales, oauth.New(oauth.InvalidRequest, "client_id does not match the id_token_hint"))
			return
		}
		clientID = hint.ClientID
	}
	target, err := h.redirectTarget(ctx, clientID, req.redirectURI)
	if err != nil {
		h.fail(w, r, req.locales, err)
		return
	}
	ua, sessions, expired, err := h.browserSessions(ctx, r)
	if err != nil {
		h.fail(w, r, req.locales, err)
		return
	}
	if hint != nil && time.Since(hint.ExpiresAt) > MaxHintAge {
		h.fail(w, r, req.locales, oauth.New(oauth.InvalidRequest, "id_token_hint expired too long ago; sign out from the application again"))
		return
	}
	// A hint names a session, but only this browser's cookie shows the
	// request comes from the user's own browser: a hinted session that is
	// not this browser's (no cookie, another browser) is ended only after
	// the user confirms, as a request without a hint is.
	hintHere := hint != nil && slices.ContainsFunc(sessions, func(s session.Session) bool { return s.ID == hint.SessionID })
	if (hint == nil && len(sessions) > 0) || (hint != nil && !hintHere) {
		if hint != nil && ua.ID == "" {
			// The confirmation form needs this browser's CSRF token.
			if ua, err = h.Browsers.Ensure(ctx, w, r); err != nil {
				h.fail(w, r, req.locales, err)
				return
			}
		}
		if req.csrf == "" {
			h.Confirm(w, r, req.locales, ua.CSRFToken, req.fields(), sessions)
			return
		}
		if subtle.ConstantTimeCompare([]byte(req.csrf), []byte(ua.CSRFToken)) != 1 {
			e := oauth.New(oauth.InvalidRequest, "the logout form has expired; please try again")
			e.Status = http.StatusForbidden
			h.fail(w, r, req.locales, e)
			return
		}
	}
	if err := h.end(ctx, sessions, expired, hint); err != nil {
		h.fail(w, r, req.locales, err)
		return
	}
	if target == nil {
		h.LoggedOut(w, r, req.locales)
		return
	}
	if req.state != "" {
		q := target.Query()
		q.Set("state", req.state)
		target.RawQuery = q.Encode()
	}
	http.Redirect(w, r, target.String(), http.StatusFound)
}

// redirectTarget returns the post-logout redirect, or nil when there is
// none to use: no URI, no client to check it against, or not registered
// for the client byte for byte (query string included).
func (h *Handler) redirectTarget(ctx context.Context, clientID, uri string) (*url.URL, error) {
	if uri == "" || clientID == "" {
		return nil, nil
	}
	resp, err := h.Directory.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: clientID})
	if c := connect.CodeOf(err); c == connect.CodeNotFound || c == connect.CodeInvalidArgument {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !slices.Contains(resp.GetClient().GetPostLogoutRedirectUris(), uri) {
		return nil, nil
	}
	u, err := url.Parse(uri)
	if err != nil || !u.IsAbs() {
		return nil, nil
	}
	return u, nil
}

// browserSessions returns the request's user agent, its live sessions and
// its expired ones; a browser without a (valid) cookie has none. An
// expired session is gone: it is never this browser's session for a hint,
// never listed, and never asks for a confirmation.
func (h *Handler) browserSessions(ctx context.Context, r *http.Request) (ua session.UserAgent, live, expired []session.Session, err error) {
	ua, err = h.Browsers.Find(ctx, r)
	if errors.Is(err, session.ErrNotFound) {
		return ua, nil, nil, nil
	}
	if err != nil {
		return ua, nil, nil, err
	}
	live, expired, err = h.Store.Sessions(ctx, ua.ID, h.Now())
	return ua, live, expired, err
}

// end revokes the tokens of the ending sessions (the hint's and its
// user's live ones on this browser, else all of the browser's live ones),
// then deletes them, so a failed revocation leaves the session in place to
// retry. The browser's expired sessions of the same users are deleted too
// (their tokens were not revoked when they expired and are not now), so
// the login page no longer offers their accounts.
func (h *Handler) end(ctx context.Context, live, expired []session.Session, hint *authorize.Hint) error {
	var ids, forget []string
	if hint != nil {
		// The hint names the session to end; its user's other sessions on
		// this browser go too.
		ids = append(ids, hint.SessionID)
	}
	ending := func(s session.Session) bool {
		return hint == nil || (s.UserID == hint.Subject && s.ID != hint.SessionID)
	}
	for _, s := range live {
		if ending(s) {
			ids = append(ids, s.ID)
		}
	}
	for _, s := range expired {
		if ending(s) {
			forget = append(forget, s.ID)
		}
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := h.Tokens.RevokeSession(ctx, id); err != nil {
			return err
		}
	}
	return h.Store.Delete(ctx, append(ids, forget...)...)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, locales []string, err error) {
	e := oauth.As(err)
	status := e.Status
	if c := connect.CodeOf(err); c == connect.CodeUnavailable || c == connect.CodeDeadlineExceeded {
		e = oauth.New(oauth.TemporarilyUnavailable, "a service is unavailable, try again").WithCause(err)
		status = http.StatusServiceUnavailable
	}
	e.Log(r.Context(), h.Logger, "end_session")
	h.ErrorPage(w, r, locales, status, e)
}
