package grants

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
)

// Grant type names.
const (
	TypeAuthorizationCode = "authorization_code"
	TypeRefreshToken      = "refresh_token"
	TypeClientCredentials = "client_credentials"
	TypeJWTBearer         = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	TypeDeviceCode        = lifecycle.GrantDeviceCode
	TypeTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// Directory is what the grants need from the directory's internal API.
type Directory interface {
	GetMachineKey(context.Context, *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error)
	GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error)
}

// Spec says who may use a grant. The dispatcher authenticates the client
// with one of Methods and checks its eligibility before the grant sees
// the request, so a grant cannot forget either.
type Spec struct {
	// Methods are the client authentication methods the grant accepts.
	Methods []clients.Method
	// SelfAuthenticated: the grant authenticates its caller itself, by
	// what the request carries (RFC 7523 §2.1: the jwt-bearer assertion
	// names and proves the machine user); it has no Methods.
	SelfAuthenticated bool
	// Kinds are the client kinds that may use the grant.
	Kinds []directoryv1.ClientKind
	// Registered, when set, is the grant type the client must have
	// registered, unless of a kind in Unregistered (machine users register
	// no grant types).
	Registered   string
	Unregistered []directoryv1.ClientKind
}

// Request is a token request as the dispatcher hands it to a grant: the
// authenticated client (nil for a self-authenticated grant), the
// credentials presented, and the grant's parameters decoded once from the
// form (form.Decode: P's `form` tags).
type Request[P any] struct {
	*clients.Authenticated
	Creds  clients.Credentials
	Params P
	// Lists are the repeatable parameters' values (form.Repeatable).
	Lists map[string][]string
}

// grant is a registered grant type.
type grant struct {
	spec  Spec
	serve func(ctx context.Context, auth *clients.Authenticated, f *form.Request) (*mint.Response, error)
}

// Endpoint is the token endpoint.
type Endpoint struct {
	Logger *slog.Logger
	Auth   *clients.Authenticator
	// DPoP, when set, binds the tokens of a request with a DPoP proof for
	// URL (the endpoint's public address) to the proof's key (RFC 9449 §5).
	DPoP   *dpop.Verifier
	URL    string
	grants map[string]grant
}

// Deps are the dependencies shared by the grants.
type Deps struct {
	Auth       *clients.Authenticator
	Minter     *mint.Minter
	Dir        Directory
	Assertions *assertion.Verifier
	// Lifecycle serves the authorization_code and refresh_token grants.
	Lifecycle *lifecycle.Lifecycle
	// Cuts finds users' cut-offs on the revocation list.
	Cuts Cuts
	// DPoP and URL: see Endpoint.
	DPoP *dpop.Verifier
	URL  string
}

// Cuts is the revocation list's view of users' cut-offs.
type Cuts interface {
	RevokedUntil(ctx context.Context, id string) (time.Time, error)
}

// allMethods are the four methods of the seed's client authentication table.
var allMethods = []clients.Method{clients.SecretBasic, clients.SecretPost, clients.None, clients.PrivateKeyJWT}

var oidcApp = []directoryv1.ClientKind{directoryv1.ClientKind_CLIENT_KIND_OIDC_APP}

// New returns the endpoint with every implemented grant.
func New(d Deps, logger *slog.Logger) *Endpoint {
	e := &Endpoint{Logger: logger, Auth: d.Auth, DPoP: d.DPoP, URL: d.URL, grants: map[string]grant{}}
	register(e, TypeAuthorizationCode, Spec{Methods: allMethods, Kinds: oidcApp, Registered: lifecycle.GrantAuthorizationCode},
		(&authorizationCode{d}).handle)
	register(e, TypeRefreshToken, Spec{Methods: allMethods, Kinds: oidcApp, Registered: lifecycle.GrantRefreshToken},
		(&refreshToken{d}).handle)
	// The seed: client_credentials with a client secret only.
	register(e, TypeClientCredentials, Spec{Methods: []clients.Method{clients.SecretBasic, clients.SecretPost},
		Kinds: []directoryv1.ClientKind{directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER}}, (&clientCredentials{d}).handle)
	register(e, TypeJWTBearer, Spec{SelfAuthenticated: true}, (&jwtBearer{d}).handle)
	register(e, TypeDeviceCode, Spec{Methods: allMethods, Kinds: oidcApp, Registered: lifecycle.GrantDeviceCode},
		(&deviceCode{d}).handle)
	machine := directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER
	register(e, TypeTokenExchange, Spec{Methods: []clients.Method{clients.SecretBasic, clients.SecretPost, clients.PrivateKeyJWT},
		Kinds: append(slices.Clone(oidcApp), machine), Registered: TypeTokenExchange, Unregistered: []directoryv1.ClientKind{machine}},
		(&tokenExchange{d}).handle)
	return e
}

// register adds a grant type; a Spec that neither authenticates the
// client nor says the grant does it itself is a programming error.
func register[P any](e *Endpoint, grantType string, spec Spec, handle func(context.Context, *Request[P]) (*mint.Response, error)) {
	if spec.SelfAuthenticated == (len(spec.Methods) > 0) || (len(spec.Methods) > 0 && len(spec.Kinds) == 0) {
		panic("grants: " + grantType + " must either authenticate the client (Methods and Kinds) or be SelfAuthenticated")
	}
	if _, dup := e.grants[grantType]; dup {
		panic("grants: " + grantType + " registered twice")
	}
	e.grants[grantType] = grant{spec: spec, serve: func(ctx context.Context, auth *clients.Authenticated, f *form.Request) (*mint.Response, error) {
		r := &Request[P]{Authenticated: auth, Creds: f.Creds, Lists: f.Lists}
		if err := form.Decode(f.Values, &r.Params); err != nil {
			return nil, err
		}
		return handle(ctx, r)
	}}
}

// ServeHTTP implements the endpoint.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.DPoP != nil && e.DPoP.Nonces != nil {
		w.Header().Set("DPoP-Nonce", e.DPoP.Nonces.Current())
	}
	grantType, res, err := e.dispatch(r)
	if err == nil {
		issued.Inc(r.Context(), grantType)
		writeResponse(w, res)
		return
	}
	if _, ok := e.grants[grantType]; !ok {
		grantType = "unknown"
	}
	refused.Inc(r.Context(), grantType, oauth.As(err).Code)
	oauth.Write(w, r, e.Logger, "token request", err)
}

// dispatch parses the request once by the rules of package form (POST, a
// bounded form body, each parameter at most once, client credentials from
// the header and the body), finds the grant, authenticates the client as
// the grant's Spec allows and checks its eligibility, then runs the grant.
func (e *Endpoint) dispatch(r *http.Request) (string, *mint.Response, error) {
	f, err := form.Parse(r)
	if err != nil {
		return "", nil, err
	}
	grantType := f.Get("grant_type")
	if grantType == "" {
		return "", nil, oauth.New(oauth.InvalidRequest, "grant_type is required").WithHint("send grant_type: one of %s", e.types())
	}
	g, ok := e.grants[grantType]
	if !ok {
		return grantType, nil, oauth.New(oauth.UnsupportedGrantType, "grant_type %q is not supported", grantType).
			WithHint("send grant_type: one of %s", e.types())
	}
	ctx := r.Context()
	var auth *clients.Authenticated
	if !g.spec.SelfAuthenticated {
		if auth, err = e.Auth.Authenticate(ctx, f.Creds, g.spec.Methods...); err != nil {
			return grantType, nil, err
		}
		if err := g.spec.eligible(auth.Client, grantType); err != nil {
			return grantType, nil, err
		}
	}
	// The proof after the client's authentication: a stranger's proofs
	// take no room in the replay store.
	if ctx, err = e.proof(r); err != nil {
		return grantType, nil, err
	}
	if auth != nil && auth.Client.GetDpopBoundAccessTokens() && dpop.Key(ctx) == "" {
		// RFC 9449 §5.2: the app registered dpop_bound_access_tokens.
		return grantType, nil, oauth.New(oauth.InvalidDPoPProof, "the client's tokens must be DPoP-bound: send a DPoP proof")
	}
	res, err := g.serve(ctx, auth, f)
	return grantType, res, err
}

// proof checks the request's DPoP proof, if any, and returns the
// request's context carrying its key (dpop.WithKey): every token the
// grant mints is bound to it.
func (e *Endpoint) proof(r *http.Request) (context.Context, error) {
	ctx := r.Context()
	hs := r.Header.Values("DPoP")
	switch {
	case len(hs) == 0:
		return ctx, nil
	case e.DPoP == nil:
		return nil, oauth.New(oauth.InvalidDPoPProof, "DPoP is not enabled on this server")
	case len(hs) > 1:
		return nil, oauth.New(oauth.InvalidDPoPProof, "more than one DPoP header")
	}
	p, err := e.DPoP.Verify(ctx, hs[0], dpop.Request{Method: r.Method, URL: e.URL})
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		return nil, oauth.New(oauth.UseDPoPNonce, "Authorization server requires nonce in DPoP proof")
	case errors.Is(err, dpop.ErrInvalid):
		return nil, oauth.New(oauth.InvalidDPoPProof, "the DPoP proof is invalid").WithCause(err)
	case err != nil:
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the DPoP proof could not be checked; retry").WithCause(err)
	}
	return dpop.WithKey(ctx, p.JKT), nil
}

// types lists the grant types the endpoint serves.
func (e *Endpoint) types() string { return strings.Join(slices.Sorted(maps.Keys(e.grants)), ", ") }

// eligible refuses a client of another kind, or one that has not
// registered the grant type (unauthorized_client, RFC 6749 §5.2).
func (s Spec) eligible(c *directoryv1.Client, grantType string) error {
	if !slices.Contains(s.Kinds, c.GetKind()) {
		return oauth.New(oauth.UnauthorizedClient, "the client may not use the %s grant", grantType)
	}
	if s.Registered != "" && !slices.Contains(s.Unregistered, c.GetKind()) && !slices.Contains(c.GetGrantTypes(), s.Registered) {
		return oauth.New(oauth.UnauthorizedClient, "the client may not use the %s grant", grantType).
			WithHint("add %s to the application's grant types", s.Registered)
	}
	return nil
}

// Token endpoint outcomes, by grant type (only the supported ones; the
// rest is "unknown") and OAuth error code.
var (
	issued  = telemetry.MustCounter("gatehouse.tokens.issued", "Token responses by grant type.", "grant_type")
	refused = telemetry.MustCounter("gatehouse.tokens.refused", "Token endpoint errors by grant type and OAuth error code.", "grant_type", "error")
)

// writeResponse writes the token response (RFC 6749 §5.1), never cached.
func writeResponse(w http.ResponseWriter, res *mint.Response) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	_ = json.NewEncoder(w).Encode(res)
}
