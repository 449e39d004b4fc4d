package authorize

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	scopes "github.com/gatehouse-id/gatehouse/services/tokens/scope"
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
	// DPoPJKT binds the code to a DPoP key (RFC 9449 §10): its redemption
	// needs a proof of that key.
	DPoPJKT      string   `json:"dpop_jkt,omitempty"`
	Prompt       []string `json:"prompt,omitempty"`
	ResponseMode string   `json:"response_mode,omitempty"`
	MaxAge       *int64   `json:"max_age,omitempty"` // seconds
	LoginHint    string   `json:"login_hint,omitempty"`
	// ACR is the class the login must reach: the first acr_values entry
	// Gatehouse supports (OIDC Core §3.1.2.1: in order of preference);
	// "" when none.
	ACR         string   `json:"acr,omitempty"`
	HintSubject string   `json:"hint_subject,omitempty"` // sub of a verified id_token_hint
	UILocales   []string `json:"ui_locales,omitempty"`
	OrgID       string   `json:"org_id"` // the organization users sign in to
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
	// Account: the account page's own sign-in (AccountRequest), not an
	// application's: it ends on the account page, with no code or token.
	// Only authn sets it; no parameter of a request reaches it.
	Account bool `json:"account,omitempty"`
	// Device: a device authorization (RFC 8628) the person approves on
	// the /device pages; it ends on Gatehouse, with the decision recorded
	// for the device's poll. Only DeviceRequest sets it.
	Device *DeviceRef `json:"device,omitempty"`
}

// DeviceRef names the device authorization a request approves.
type DeviceRef struct {
	ID       string `json:"id"`
	UserCode string `json:"user_code"` // XXXX-XXXX, shown on the pages
}

// Paths of the device flow's pages (served by package login).
const (
	PathDevice     = "/device"
	PathDeviceDone = "/device/done"
)

// PathAccount is the account page (served by package login).
const PathAccount = "/ui/account"

// AccountRequest is the sign-in of the account page to orgID's users; a
// loginHint (the session's user) asks for a fresh one (prompt=login),
// which a sensitive change needs.
func AccountRequest(orgID, issuer, loginHint string, locales []string, now time.Time) *Request {
	req := &Request{OrgID: orgID, ClientOrgID: orgID, Scopes: []string{"openid"}, ResponseType: ResponseCode,
		UILocales: locales, Issuer: issuer, StartedAt: now, Account: true, LoginHint: loginHint}
	if loginHint != "" {
		req.Prompt = []string{PromptLogin}
	}
	return req
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
	if r.Account || r.Device != nil {
		return nil // the account page's and a device's errors show on Gatehouse
	}
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
	// Pushed keeps pushed requests (RFC 9126); RequirePAR refuses every
	// request that was not pushed (GATEHOUSE_REQUIRE_PAR).
	Pushed     Pushed
	RequirePAR bool
	Now        func() time.Time
}

// singleParams are the parameters that must not be repeated besides
// client_id, redirect_uri, response_type and state (checked first).
var singleParams = []string{"scope", "nonce", "code_challenge", "code_challenge_method", "dpop_jkt", "prompt", "max_age",
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
