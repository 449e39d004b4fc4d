package authorize

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/redirecturi"
	scopes "github.com/gatehouse-id/gatehouse/pkg/scope"
)

// OrgScopePrefix is the reserved scope that selects the organization users
// sign in to: urn:gatehouse:iam:org:id:{orgId}.
const OrgScopePrefix = "urn:gatehouse:iam:org:id:"

// Response types (OIDC Core §3.1.2.1, §3.2.2.1).
const (
	ResponseCode            = "code"
	ResponseIDToken         = "id_token"
	ResponseIDTokenAndToken = "id_token token"
)

// Prompt values (OIDC Core §3.1.2.1; create from OIDC Prompt Create 1.0).
const (
	PromptNone          = "none"
	PromptLogin         = "login"
	PromptConsent       = "consent"
	PromptSelectAccount = "select_account"
	PromptCreate        = "create"
)

// Response modes Gatehouse answers in (discovery's response_modes_supported).
const (
	ModeQuery    = "query"
	ModeFragment = "fragment"
)

// PromptValues are the prompt values Gatehouse acts on (discovery's
// prompt_values_supported).
var PromptValues = []string{PromptNone, PromptLogin, PromptConsent, PromptSelectAccount, PromptCreate}

// Request is a validated authorization request, stored while the user
// signs in. Only Validate makes one.
type Request struct {
	ClientID      string   `json:"client_id"`
	AppName       string   `json:"app_name"`
	RedirectURI   string   `json:"redirect_uri"`
	ResponseType  string   `json:"response_type"` // normalized: one of the Response* constants
	Scopes        []string `json:"scopes"`
	State         string   `json:"state,omitempty"`
	Nonce         string   `json:"nonce,omitempty"`
	CodeChallenge string   `json:"code_challenge,omitempty"` // method is always S256
	Prompt        []string `json:"prompt,omitempty"`
	ResponseMode  string   `json:"response_mode,omitempty"`
	MaxAge        *int64   `json:"max_age,omitempty"` // seconds
	LoginHint     string   `json:"login_hint,omitempty"`
	HintSubject   string   `json:"hint_subject,omitempty"` // sub of a verified id_token_hint
	UILocales     []string `json:"ui_locales,omitempty"`
	OrgID         string   `json:"org_id"` // the organization users sign in to
	// ClientOrgID owns the app; a user of another (granted) organization
	// consents before the app gets tokens, unless the app is an admin
	// client (AdminClient).
	ClientOrgID string `json:"client_org_id"`
	AdminClient bool   `json:"admin_client,omitempty"`
	// GrantIDs are the app's project grants (organization → grant id): a
	// consent holds for the grant it was given under.
	GrantIDs map[string]string `json:"grant_ids,omitempty"`
	// Issuer is sent back as iss with the response (RFC 9207).
	Issuer string `json:"issuer,omitempty"`
	// IdPID: the shortcut scope names an identity provider of OrgID; the
	// login goes straight to it.
	IdPID string `json:"idp_id,omitempty"`
	// StartedAt is when the authorization endpoint received the request:
	// prompt=login is met only by an authentication at or after it.
	StartedAt time.Time `json:"started_at,omitzero"`
}

// ConfirmsManagement reports whether the request may get a management
// token only once the person confirms it on a page: every admin client's
// request for the management audience. A public client cannot be assured
// to be the one it names (RFC 8252 §8.6); a confidential one can, but a
// plain navigation (a link, an image, a frame) starts its request with
// the person's session, so "interactive only" means the person says so.
func (r *Request) ConfirmsManagement() bool {
	return r.AdminClient && r.AsksManagement()
}

// AsksManagement reports whether the request asks for the management
// API's audience (which only admin clients may, interactively).
func (r *Request) AsksManagement() bool {
	for _, s := range r.Scopes {
		if fam, _ := scopes.Classify(s); fam == scopes.ReservedManagement {
			return true
		}
	}
	return false
}

// Implicit reports whether the response goes in the fragment.
func (r *Request) Implicit() bool { return r.ResponseType != ResponseCode }

// HasPrompt reports whether prompt contains p.
func (r *Request) HasPrompt(p string) bool { return slices.Contains(r.Prompt, p) }

// Target is where an error or a response is sent.
func (r *Request) Target() *Target {
	return &Target{RedirectURI: r.RedirectURI, State: r.State, Fragment: r.Implicit() || r.ResponseMode == ModeFragment, Issuer: r.Issuer}
}

// Params are the raw parameters of one request: the query of a GET, the
// form body of a POST.
type Params url.Values

// ParseParams reads the parameters of an authorization request once.
// OIDC Core §3.1.2.1: GET uses the query, POST a form body.
func ParseParams(r *http.Request) (Params, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return Params(r.URL.Query()), nil
	case http.MethodPost:
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if ct != "application/x-www-form-urlencoded" {
			return nil, oauth.New(oauth.InvalidRequest, "a POST must carry an application/x-www-form-urlencoded body")
		}
		r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			return nil, oauth.New(oauth.InvalidRequest, "malformed form body").WithCause(err)
		}
		return Params(r.PostForm), nil
	default:
		e := oauth.New(oauth.InvalidRequest, "method %s not allowed", r.Method)
		e.Status = http.StatusMethodNotAllowed
		return nil, e
	}
}

// one returns a single-valued parameter; repeated is an error (RFC 6749 §3.1).
func (p Params) one(name string) (string, error) {
	v := p[name]
	switch len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	default:
		return "", oauth.New(oauth.InvalidRequest, "parameter %s is repeated", name)
	}
}

// Locales are the ui_locales of the raw parameters, for the error page.
func (p Params) Locales() []string {
	v, _ := p.one("ui_locales")
	return strings.Fields(v)
}

// Validator validates authorization requests against the directory and
// the tokens service.
type Validator struct {
	Directory Directory
	Tokens    Tokens
	// Issuer is sent as iss with every authorization response (RFC 9207),
	// so a client that talks to several servers detects a mix-up.
	Issuer string
}

// Validate checks p and returns the request, or a Failure: one that shows
// the error page (unknown or inactive client, missing or unregistered
// redirect_uri), or one sent to the redirect_uri (every other row of the
// authorization error table).
func (v *Validator) Validate(ctx context.Context, p Params) (*Request, *Failure) {
	clientID, err := p.one("client_id")
	if err != nil {
		return nil, pageFailure(err)
	}
	if clientID == "" {
		return nil, pageFailure(oauth.New(oauth.InvalidRequest, "client_id is missing"))
	}
	// The client decides which reserved scopes it may ask for (its grants,
	// its admin mark, its organization's projects): a request for one
	// reads it fresh, past authn's cache.
	clientCtx := ctx
	if strings.Contains(p.first("scope"), "urn:") {
		clientCtx = dircache.Fresh(ctx)
	}
	resp, err := v.Directory.GetClient(clientCtx, connect.NewRequest(&directoryv1.GetClientRequest{ClientId: clientID}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument {
			return nil, pageFailure(oauth.New(oauth.InvalidRequest, "unknown client_id").WithCause(err))
		}
		return nil, pageFailure(dependencyError("directory", err))
	}
	client := resp.Msg.GetClient()
	if client.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP || !client.GetActive() {
		return nil, pageFailure(oauth.New(oauth.InvalidRequest, "the client is not an active OIDC application"))
	}
	redirectURI, err := p.one("redirect_uri")
	if err != nil {
		return nil, pageFailure(err)
	}
	if redirectURI == "" {
		return nil, pageFailure(oauth.New(oauth.InvalidRequest, "redirect_uri is missing"))
	}
	// Exact match, except a native app's loopback port (RFC 8252 §7.3).
	if !redirecturi.Registered(client, redirectURI) {
		return nil, pageFailure(oauth.New(oauth.InvalidRequest, "redirect_uri is not registered for this client"))
	}
	if u, err := url.Parse(redirectURI); err != nil || u.Fragment != "" || !u.IsAbs() {
		return nil, pageFailure(oauth.New(oauth.InvalidRequest, "redirect_uri is not an absolute URI without fragment"))
	}

	// From here on errors go to the redirect_uri, with state when it is
	// usable, in the fragment for the implicit response types.
	rawType, typeErr := p.one("response_type")
	respType, known := normalizeResponseType(rawType)
	target := &Target{RedirectURI: redirectURI, Fragment: known && respType != ResponseCode, Issuer: v.Issuer}
	state, err := p.one("state")
	if err != nil {
		return nil, &Failure{Err: oauth.As(err), Target: target}
	}
	target.State = state
	fail := func(code, format string, args ...any) (*Request, *Failure) {
		return nil, &Failure{Err: oauth.New(code, format, args...), Target: target}
	}
	for _, name := range singleParams {
		if len(p[name]) > 1 {
			return fail(oauth.InvalidRequest, "parameter %s is repeated", name)
		}
	}
	// response_mode (OAuth 2.0 Multiple Response Type Encoding Practices):
	// the advertised query and fragment are honoured, anything else (jwt,
	// form_post, …) refused rather than silently answered as query.
	mode := p.first("response_mode")
	switch mode {
	case "":
	case ModeFragment:
		target.Fragment = true
	case ModeQuery:
		if target.Fragment {
			return fail(oauth.InvalidRequest, "response_mode query is not allowed for response_type %q: tokens never go in a query", rawType)
		}
	default:
		return fail(oauth.InvalidRequest, "response_mode %q is not supported (query, fragment)", mode)
	}
	// Request objects are not supported (discovery says so): refusing
	// beats ignoring parameters the client put only there.
	if p.first("request") != "" {
		return fail(oauth.RequestNotSupported, "request objects (the request parameter) are not supported")
	}
	if p.first("request_uri") != "" {
		return fail(oauth.RequestURINotSupported, "request_uri is not supported")
	}
	switch {
	case typeErr != nil || rawType == "":
		return fail(oauth.InvalidRequest, "response_type is missing")
	case !known:
		return fail(oauth.UnsupportedResponseType, "response_type %q is not supported", rawType)
	case !slices.Contains(client.GetResponseTypes(), respType) || !slices.Contains(client.GetGrantTypes(), grantFor(respType)):
		return fail(oauth.UnauthorizedClient, "the client may not use response_type %q", respType)
	}
	req := &Request{ClientID: clientID, AppName: client.GetName(), RedirectURI: redirectURI, ResponseType: respType, State: state, ResponseMode: mode,
		ClientOrgID: client.GetOrgId(), AdminClient: client.GetAdminClient(), Issuer: v.Issuer, GrantIDs: client.GetGrantIds()}

	scope := p.first("scope")
	if scope == "" {
		return fail(oauth.InvalidRequest, "scope is missing")
	}
	if strings.ContainsAny(scope, "\t\r\n") {
		return fail(oauth.InvalidScope, "scope values are separated by single spaces")
	}
	parsed, err := scopes.Parse(scope)
	if err != nil {
		return nil, &Failure{Err: oauth.As(err), Target: target}
	}
	req.Scopes = parsed
	if !slices.Contains(req.Scopes, "openid") {
		return fail(oauth.InvalidScope, "scope must contain openid")
	}
	for _, s := range req.Scopes {
		if org, ok := strings.CutPrefix(s, OrgScopePrefix); ok {
			if org == "" || (req.OrgID != "" && req.OrgID != org) {
				return fail(oauth.InvalidScope, "the organization scope must name exactly one organization")
			}
			req.OrgID = org
		}
	}

	challenge, method := p.first("code_challenge"), p.first("code_challenge_method")
	switch {
	case challenge == "" && method != "":
		return fail(oauth.InvalidRequest, "code_challenge_method without code_challenge")
	case challenge != "" && method != "S256":
		return fail(oauth.InvalidRequest, "code_challenge_method must be S256")
	case challenge != "" && !validChallenge(challenge):
		return fail(oauth.InvalidRequest, "code_challenge must be 43 to 128 characters of base64url")
	case challenge == "" && respType == ResponseCode && client.GetAuthMethod() == directoryv1.AuthMethod_AUTH_METHOD_NONE:
		return fail(oauth.InvalidRequest, "code_challenge is required for this client (PKCE, S256)")
	case challenge != "" && respType != ResponseCode:
		return fail(oauth.InvalidRequest, "code_challenge is only for response_type code")
	}
	req.CodeChallenge = challenge

	req.Nonce = p.first("nonce")
	if req.Implicit() && req.Nonce == "" {
		return fail(oauth.InvalidRequest, "nonce is required for response_type %q", respType)
	}

	// Unknown prompt values are ignored, as ZITADEL does (some relying
	// parties send their own); none with anything else stays an error.
	prompts := strings.Fields(p.first("prompt"))
	if slices.Contains(prompts, PromptNone) && len(prompts) > 1 {
		return fail(oauth.InvalidRequest, "prompt none cannot be combined with other values")
	}
	for _, pr := range prompts {
		if slices.Contains(PromptValues, pr) {
			req.Prompt = append(req.Prompt, pr)
		}
	}
	// Who may ask for which reserved scope (pkg/scope's table): the
	// management audience only for admin clients and never silently, the
	// project audiences only for the client's own organization, the
	// organization scope only among the orgs whose users the app signs in.
	requester := scopes.ForClient(client)
	requester.NoInteraction = req.HasPrompt(PromptNone)
	if err := scopes.Check(requester, req.Scopes); err != nil {
		return nil, &Failure{Err: oauth.As(err), Target: target}
	}

	if s := p.first("max_age"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fail(oauth.InvalidRequest, "max_age must be a non-negative integer")
		}
		req.MaxAge = &n
	}
	req.LoginHint = strings.TrimSpace(p.first("login_hint"))
	req.UILocales = strings.Fields(p.first("ui_locales"))

	if hint := p.first("id_token_hint"); hint != "" {
		// An expired hint is refused here (end_session accepts one).
		h, err := v.Tokens.VerifyIDTokenHint(ctx, hint, false)
		if err != nil {
			if c := connect.CodeOf(err); c == connect.CodeInvalidArgument || c == connect.CodeUnauthenticated {
				return nil, &Failure{Err: oauth.New(oauth.InvalidRequest, "id_token_hint is not a valid ID token of this issuer").WithCause(err), Target: target}
			}
			return nil, &Failure{Err: dependencyError("tokens", err), Target: target}
		}
		req.HintSubject = h.Subject
	}

	if req.OrgID == "" {
		req.OrgID = client.GetOrgId()
	} else {
		org, err := v.Directory.GetOrg(ctx, connect.NewRequest(&directoryv1.GetOrgRequest{OrgId: req.OrgID}))
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument:
			return fail(oauth.InvalidScope, "the organization of the scope does not exist")
		case err != nil:
			return nil, &Failure{Err: dependencyError("directory", err), Target: target}
		case !org.Msg.GetActive():
			return fail(oauth.InvalidScope, "the organization of the scope is not active")
		}
	}
	if id := scopes.IdP(req.Scopes); id != "" {
		res, err := v.Directory.GetIdP(ctx, connect.NewRequest(&directoryv1.GetIdPRequest{OrgId: req.OrgID, IdpId: id}))
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument ||
			(err == nil && !res.Msg.GetIdp().GetActive()):
			return fail(oauth.InvalidScope, "the identity provider of the scope is unknown, inactive or of another organization")
		case err != nil:
			return nil, &Failure{Err: dependencyError("directory", err), Target: target}
		}
		req.IdPID = id
	}
	return req, nil
}

// singleParams are the parameters that must not be repeated besides
// client_id, redirect_uri, response_type and state (checked first).
var singleParams = []string{"scope", "nonce", "code_challenge", "code_challenge_method", "prompt", "max_age",
	"login_hint", "id_token_hint", "ui_locales", "display", "acr_values", "response_mode"}

// first returns a parameter already checked not to be repeated.
func (p Params) first(name string) string {
	if v := p[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// normalizeResponseType maps the space-separated set to its constant;
// order does not matter (OAuth 2.0 Multiple Response Types §5).
func normalizeResponseType(s string) (string, bool) {
	f := strings.Fields(s)
	slices.Sort(f)
	switch strings.Join(f, " ") {
	case "code":
		return ResponseCode, true
	case "id_token":
		return ResponseIDToken, true
	case "id_token token":
		return ResponseIDTokenAndToken, true
	}
	return "", false
}

func grantFor(responseType string) string {
	if responseType == ResponseCode {
		return "authorization_code"
	}
	return "implicit"
}

// validChallenge: RFC 7636 §4.2, an S256 challenge is base64url; the
// length bounds are the verifier's.
func validChallenge(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}

// dependencyError maps a failed call to another service: unavailable is
// temporarily_unavailable (retry), anything else server_error.
func dependencyError(service string, err error) *oauth.Error {
	switch c := connect.CodeOf(err); {
	case c == connect.CodeUnavailable || c == connect.CodeDeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return oauth.New(oauth.TemporarilyUnavailable, "the %s service is unavailable, try again", service).WithCause(err)
	case c == connect.CodePermissionDenied || c == connect.CodeFailedPrecondition:
		// The service checks the policy this one just passed, from its
		// own view of the directory: for about a second after a change
		// (a grant, a client, an admin mark) the two can disagree. A
		// retry then gets the agreed answer; it is not a server error.
		return oauth.New(oauth.TemporarilyUnavailable, "the request cannot be completed right now, try again").WithCause(fmt.Errorf("%s: %w", service, err))
	}
	return oauth.New(oauth.ServerError, "internal error").WithCause(fmt.Errorf("%s: %w", service, err))
}
