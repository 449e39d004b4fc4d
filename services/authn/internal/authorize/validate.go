package authorize

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/redirecturi"
	scopes "github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Validate checks p and returns the request, or a Failure: one that shows
// the error page (unknown or inactive client, missing or unregistered
// redirect_uri), or one sent to the redirect_uri (every other row of the
// authorization error table). It runs the steps of RFC 6749 §4.1.2.1 and
// OIDC Core §3.1.2.2 in order; the first that refuses decides the error.
func (v *Validator) Validate(ctx context.Context, p Params) (*Request, *Failure) {
	clientID, err := p.one("client_id")
	if err != nil {
		return nil, pageFailure(err)
	}
	pushed := false
	if clientID != "" {
		// A pushed request or a request object is the request itself.
		if p, pushed, err = v.unpack(ctx, clientID, p); err != nil {
			return nil, pageFailure(err)
		}
	}
	return v.check(ctx, p, pushed)
}

// check validates a request's own parameters (a pushed request's, a
// request object's, or the query's); pushed: they were pushed (RFC 9126),
// which a client or the server may require.
func (v *Validator) check(ctx context.Context, p Params, pushed bool) (*Request, *Failure) {
	client, err := v.client(ctx, p)
	if err != nil {
		return nil, pageFailure(err)
	}
	if !pushed && (v.RequirePAR || client.GetRequirePushedAuthorizationRequests()) {
		return nil, pageFailure(oauth.New(oauth.InvalidRequest, "authorization requests of this client must be pushed first").
			WithHint("POST the request to %s and send only client_id and the request_uri it answers", PathPAR))
	}
	redirectURI, err := checkRedirectURI(client, p)
	if err != nil {
		return nil, pageFailure(err)
	}
	// From here on errors go to the redirect_uri, with state when it is
	// usable, in the fragment for the implicit response types.
	s := &steps{v: v, p: p, client: client, target: &Target{RedirectURI: redirectURI, Issuer: v.Issuer}}
	for _, step := range []func(context.Context) error{
		s.responseTypeAndMode, s.scope, s.pkce, s.dpopJKT, s.nonce, s.prompt, s.reservedScopes, s.maxAgeAndHints, s.idTokenHint, s.organization,
	} {
		if err := step(ctx); err != nil {
			return nil, &Failure{Err: oauth.As(err), Target: s.target}
		}
	}
	return s.req, nil
}

// client: client_id names an active OIDC application (else the error page).
// The client decides which reserved scopes it may ask for (its grants, its
// admin mark, its organization's projects): a request for one reads it
// fresh, past authn's cache.
func (v *Validator) client(ctx context.Context, p Params) (*directoryv1.Client, error) {
	clientID, err := p.one("client_id")
	if err != nil {
		return nil, err
	}
	if clientID == "" {
		return nil, oauth.New(oauth.InvalidRequest, "client_id is missing")
	}
	clientCtx := ctx
	if strings.Contains(p.first("scope"), "urn:") {
		clientCtx = dircache.Fresh(ctx)
	}
	resp, err := v.Directory.GetClient(clientCtx, &directoryv1.GetClientRequest{ClientId: clientID})
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument {
			return nil, oauth.New(oauth.InvalidRequest, "unknown client_id").WithCause(err)
		}
		return nil, dependencyError("directory", err)
	}
	client := resp.GetClient()
	if client.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP || !client.GetActive() {
		return nil, oauth.New(oauth.InvalidRequest, "the client is not an active OIDC application")
	}
	return client, nil
}

// checkRedirectURI: redirect_uri is one the client registered (exact
// match, except a native app's loopback port, RFC 8252 §7.3), absolute and
// without fragment (else the error page: nothing may be sent to it).
func checkRedirectURI(client *directoryv1.Client, p Params) (string, error) {
	redirectURI, err := p.one("redirect_uri")
	if err != nil {
		return "", err
	}
	if redirectURI == "" {
		return "", oauth.New(oauth.InvalidRequest, "redirect_uri is missing")
	}
	if !redirecturi.Registered(client, redirectURI) {
		return "", oauth.New(oauth.InvalidRequest, "redirect_uri is not registered for this client").
			WithHint("register this exact URI among the application's redirect URIs (only a native app's loopback port may differ)")
	}
	if u, err := url.Parse(redirectURI); err != nil || u.Fragment != "" || !u.IsAbs() {
		return "", oauth.New(oauth.InvalidRequest, "redirect_uri is not an absolute URI without fragment")
	}
	return redirectURI, nil
}

// steps are the checks after the redirect_uri is known; each refines
// target (where the error goes) and req as it goes.
type steps struct {
	v      *Validator
	p      Params
	client *directoryv1.Client
	target *Target
	req    *Request
}

// responseTypeAndMode: state, no repeated parameter, a supported
// response_mode that does not put tokens in a query, and a response_type the client registered (with its grant type).
func (s *steps) responseTypeAndMode(context.Context) error {
	p, target := s.p, s.target
	rawType, typeErr := p.one("response_type")
	respType, known := normalizeResponseType(rawType)
	target.Fragment = known && respType != ResponseCode
	state, err := p.one("state")
	if err != nil {
		return err
	}
	target.State = state
	for _, name := range singleParams {
		if len(p[name]) > 1 {
			return oauth.New(oauth.InvalidRequest, "parameter %s is repeated", name)
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
			return oauth.New(oauth.InvalidRequest, "response_mode query is not allowed for response_type %q: tokens never go in a query", rawType)
		}
	default:
		return oauth.New(oauth.InvalidRequest, "response_mode %q is not supported (query, fragment)", mode)
	}
	c := s.client
	switch {
	case typeErr != nil || rawType == "":
		return oauth.New(oauth.InvalidRequest, "response_type is missing")
	case !known:
		return oauth.New(oauth.UnsupportedResponseType, "response_type %q is not supported", rawType)
	case !slices.Contains(c.GetResponseTypes(), respType) || !slices.Contains(c.GetGrantTypes(), grantFor(respType)):
		return oauth.New(oauth.UnauthorizedClient, "the client may not use response_type %q", respType)
	}
	s.req = &Request{ClientID: p.first("client_id"), AppName: c.GetName(), RedirectURI: target.RedirectURI, ResponseType: respType,
		State: state, ResponseMode: mode, ClientOrgID: c.GetOrgId(), AdminClient: c.GetAdminClient(), Issuer: s.v.Issuer,
		GrantIDs: c.GetGrantIds()}
	return nil
}

// scope: present, single-space separated, known values, openid among them,
// and at most one organization scope.
func (s *steps) scope(context.Context) error {
	scope := s.p.first("scope")
	if scope == "" {
		return oauth.New(oauth.InvalidRequest, "scope is missing")
	}
	if strings.ContainsAny(scope, "\t\r\n") {
		return oauth.New(oauth.InvalidScope, "scope values are separated by single spaces")
	}
	parsed, err := scopes.Parse(scope)
	if err != nil {
		return err
	}
	if !slices.Contains(parsed, "openid") {
		return oauth.New(oauth.InvalidScope, "scope must contain openid")
	}
	req := s.req
	req.Scopes = parsed
	for _, sc := range parsed {
		if org, ok := strings.CutPrefix(sc, OrgScopePrefix); ok {
			if org == "" || (req.OrgID != "" && req.OrgID != org) {
				return oauth.New(oauth.InvalidScope, "the organization scope must name exactly one organization")
			}
			req.OrgID = org
		}
	}
	return nil
}

// pkce (RFC 7636): S256 only, a well-formed challenge, required of a
// client without a secret, and only with response_type code.
func (s *steps) pkce(context.Context) error {
	challenge, method := s.p.first("code_challenge"), s.p.first("code_challenge_method")
	code := s.req.ResponseType == ResponseCode
	switch {
	case challenge == "" && method != "":
		return oauth.New(oauth.InvalidRequest, "code_challenge_method without code_challenge")
	case challenge != "" && method != "S256":
		return oauth.New(oauth.InvalidRequest, "code_challenge_method must be S256")
	case challenge != "" && !validChallenge(challenge):
		return oauth.New(oauth.InvalidRequest, "code_challenge must be 43 to 128 characters of base64url")
	case challenge == "" && code && s.client.GetAuthMethod() == directoryv1.AuthMethod_AUTH_METHOD_NONE:
		return oauth.New(oauth.InvalidRequest, "code_challenge is required for this client (PKCE, S256)").
			WithHint("send code_challenge=BASE64URL(SHA-256(code_verifier)) and code_challenge_method=S256")
	case challenge != "" && !code:
		return oauth.New(oauth.InvalidRequest, "code_challenge is only for response_type code")
	}
	s.req.CodeChallenge = challenge
	return nil
}

// dpopJKT (RFC 9449 §10): the thumbprint of the key the code will be
// redeemed with, a SHA-256 in base64url; only with response_type code.
func (s *steps) dpopJKT(context.Context) error {
	jkt := s.p.first("dpop_jkt")
	switch {
	case jkt == "":
		return nil
	case s.req.ResponseType != ResponseCode:
		return oauth.New(oauth.InvalidRequest, "dpop_jkt is only for response_type code")
	case !isSHA256(jkt):
		return oauth.New(oauth.InvalidRequest, "dpop_jkt must be a base64url SHA-256 JWK thumbprint (43 characters)")
	}
	s.req.DPoPJKT = jkt
	return nil
}

// isSHA256 reports whether s is 32 bytes in unpadded base64url.
func isSHA256(s string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// nonce: required for the implicit response types (OIDC Core §3.2.2.1).
func (s *steps) nonce(context.Context) error {
	s.req.Nonce = s.p.first("nonce")
	if s.req.Implicit() && s.req.Nonce == "" {
		return oauth.New(oauth.InvalidRequest, "nonce is required for response_type %q", s.req.ResponseType)
	}
	return nil
}

// prompt: none alone; unknown values are ignored, as ZITADEL does (some
// relying parties send their own).
func (s *steps) prompt(context.Context) error {
	prompts := strings.Fields(s.p.first("prompt"))
	if slices.Contains(prompts, PromptNone) && len(prompts) > 1 {
		return oauth.New(oauth.InvalidRequest, "prompt none cannot be combined with other values")
	}
	for _, pr := range prompts {
		if slices.Contains(PromptValues, pr) {
			s.req.Prompt = append(s.req.Prompt, pr)
		}
	}
	return nil
}

// reservedScopes: who may ask for which reserved scope (pkg/scope's
// table): the management audience only for admin clients and never
// silently, the project audiences only for the client's own organization,
// the organization scope only among the orgs whose users the app signs in.
func (s *steps) reservedScopes(context.Context) error {
	requester := scopes.ForClient(s.client)
	requester.NoInteraction = s.req.HasPrompt(PromptNone)
	return scopes.Check(requester, s.req.Scopes)
}

// maxAgeAndHints: max_age a non-negative integer; login_hint and
// ui_locales kept as sent.
func (s *steps) maxAgeAndHints(context.Context) error {
	if v := s.p.first("max_age"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return oauth.New(oauth.InvalidRequest, "max_age must be a non-negative integer")
		}
		s.req.MaxAge = &n
	}
	s.req.LoginHint = strings.TrimSpace(s.p.first("login_hint"))
	s.req.UILocales = strings.Fields(s.p.first("ui_locales"))
	for _, v := range strings.Fields(s.p.first("acr_values")) {
		if slices.Contains(oauth.ACRValues(), v) {
			s.req.ACR = v
			break
		}
	}
	return nil
}

// idTokenHint: a valid, unexpired ID token of this issuer (end_session
// accepts an expired one); its subject must sign in.
func (s *steps) idTokenHint(ctx context.Context) error {
	hint := s.p.first("id_token_hint")
	if hint == "" {
		return nil
	}
	h, err := s.v.Tokens.VerifyIDTokenHint(ctx, hint, false)
	if err != nil {
		if c := connect.CodeOf(err); c == connect.CodeInvalidArgument || c == connect.CodeUnauthenticated {
			return oauth.New(oauth.InvalidRequest, "id_token_hint is not a valid ID token of this issuer").WithCause(err)
		}
		return dependencyError("tokens", err)
	}
	s.req.HintSubject = h.Subject
	return nil
}

// organization: the organization users sign in to (the scope's, active,
// or the client's own), and the identity provider the shortcut scope
// names, active and of that organization.
func (s *steps) organization(ctx context.Context) error {
	req, dir := s.req, s.v.Directory
	if req.OrgID == "" {
		req.OrgID = s.client.GetOrgId()
	} else {
		org, err := dir.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: req.OrgID})
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument:
			return oauth.New(oauth.InvalidScope, "the organization of the scope does not exist")
		case err != nil:
			return dependencyError("directory", err)
		case !org.GetActive():
			return oauth.New(oauth.InvalidScope, "the organization of the scope is not active")
		}
	}
	id := scopes.IdP(req.Scopes)
	if id == "" {
		return nil
	}
	res, err := dir.GetIdP(ctx, &directoryv1.GetIdPRequest{OrgId: req.OrgID, IdpId: id})
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument ||
		(err == nil && !res.GetIdp().GetActive()):
		return oauth.New(oauth.InvalidScope, "the identity provider of the scope is unknown, inactive or of another organization")
	case err != nil:
		return dependencyError("directory", err)
	}
	req.IdPID = id
	return nil
}
