package grants

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
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
)

// Directory is what the grants need from the directory's internal API.
type Directory interface {
	GetMachineKey(context.Context, *connect.Request[directoryv1.GetMachineKeyRequest]) (*connect.Response[directoryv1.GetMachineKeyResponse], error)
	GetUser(context.Context, *connect.Request[directoryv1.GetUserRequest]) (*connect.Response[directoryv1.GetUserResponse], error)
}

// Request is a parsed token request.
type Request struct {
	GrantType string
	// Form holds every parameter, each exactly once.
	Form  map[string]string
	Creds clients.Credentials
}

// Get returns a form parameter.
func (r *Request) Get(name string) string { return r.Form[name] }

// Grant handles one grant type.
type Grant interface {
	Handle(ctx context.Context, r *Request) (*mint.Response, error)
}

// Endpoint is the token endpoint.
type Endpoint struct {
	Logger *slog.Logger
	grants map[string]Grant
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
}

// Cuts is the revocation list's view of users' cut-offs.
type Cuts interface {
	RevokedUntil(ctx context.Context, id string) (time.Time, error)
}

// New returns the endpoint with every implemented grant.
func New(d Deps, logger *slog.Logger) *Endpoint {
	return &Endpoint{Logger: logger, grants: map[string]Grant{
		TypeAuthorizationCode: &authorizationCode{d},
		TypeRefreshToken:      &refreshToken{d},
		TypeClientCredentials: &clientCredentials{d},
		TypeJWTBearer:         &jwtBearer{d},
	}}
}

// ServeHTTP implements the endpoint.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := parse(r)
	if err == nil {
		g, ok := e.grants[req.GrantType]
		if !ok {
			err = oauth.New(oauth.UnsupportedGrantType, "grant_type %q is not supported", req.GrantType)
		} else {
			var res *mint.Response
			if res, err = g.Handle(r.Context(), req); err == nil {
				issued.Inc(r.Context(), req.GrantType)
				writeResponse(w, res)
				return
			}
		}
	}
	grant := "unknown"
	if req != nil && e.grants[req.GrantType] != nil {
		grant = req.GrantType
	}
	refused.Inc(r.Context(), grant, oauth.As(err).Code)
	oauth.Write(w, r, e.Logger, "token request", err)
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

// parse reads the request once by the rules of package form (POST, a
// bounded form body, each parameter at most once, client credentials from
// the header and the body); grant_type is required.
func parse(r *http.Request) (*Request, error) {
	f, err := form.Parse(r)
	if err != nil {
		return nil, err
	}
	req := &Request{GrantType: f.Get("grant_type"), Form: f.Values, Creds: f.Creds}
	if req.GrantType == "" {
		return nil, oauth.New(oauth.InvalidRequest, "grant_type is required")
	}
	return req, nil
}
