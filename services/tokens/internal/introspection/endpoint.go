package introspection

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
)

// Path is the public introspection endpoint.
const Path = "/oauth/v2/introspect"

// Claims is what introspection and userinfo need of the directory's
// internal API: a user's claims for the granted scopes and their login
// name. NotFound or FailedPrecondition means the user is gone (deleted or
// deactivated): its tokens count as inactive.
type Claims interface {
	GetClaims(context.Context, *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error)
}

// ClientAuthenticator authenticates the calling client (clients.Authenticator).
type ClientAuthenticator interface {
	Authenticate(ctx context.Context, cr clients.Credentials, allowed ...clients.Method) (*clients.Authenticated, error)
}

// ErrUserGone is returned by UserClaims for a user the directory no longer
// knows or has deactivated.
var ErrUserGone = errors.New("user deleted or deactivated")

// UserClaims returns the claims of t's subject for t's scopes, with sub set
// to the token's subject, and the user's login name (userName@primaryDomain).
// Errors: ErrUserGone, or an oauth temporarily_unavailable error when the
// directory cannot answer.
func UserClaims(ctx context.Context, dir Claims, t *accesstoken.Token) (map[string]any, string, error) {
	res, err := dir.GetClaims(ctx, &directoryv1.GetClaimsRequest{UserId: t.Subject, Scopes: t.Scopes})
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeFailedPrecondition:
		return nil, "", ErrUserGone
	}
	if err != nil {
		return nil, "", oauth.New(oauth.TemporarilyUnavailable, "the user directory is unavailable").WithCause(err)
	}
	var claims map[string]any
	if st := res.GetClaims(); st != nil {
		claims = st.AsMap()
	}
	if claims == nil {
		claims = make(map[string]any, 1)
	}
	claims["sub"] = t.Subject // OIDC Core §5.3.2: always the token's subject
	return claims, res.GetPreferredLoginName(), nil
}

// Endpoint is POST /oauth/v2/introspect (RFC 7662). It authenticates the
// client by client_secret_basic or private_key_jwt only (the seed's
// "Methods per endpoint"); any other method, or a failed authentication, is
// 401 invalid_client with a Basic challenge (RFC 9110 §15.5.2). token is
// required (invalid_request); token_type_hint is accepted and ignored
// (RFC 7662 §2.1: the server may ignore it). The answer is
// {"active":false} and nothing else (RFC 7662 §2.2) for a token that is
// unknown, malformed, expired, revoked, whose user is gone, or whose aud
// names neither the client's client_id nor its project id; otherwise the
// token's fields, username and the user's claims per granted scope.
// Every response is Cache-Control: no-store.
type Endpoint struct {
	Validator *accesstoken.Verifier
	Auth      ClientAuthenticator
	Directory Claims
	Logger    *slog.Logger
}

// NewEndpoint returns the introspection endpoint.
func NewEndpoint(v *accesstoken.Verifier, auth ClientAuthenticator, dir Claims, logger *slog.Logger) *Endpoint {
	if logger == nil {
		logger = slog.Default()
	}
	return &Endpoint{Validator: v, Auth: auth, Directory: dir, Logger: logger}
}

var inactive = []byte(`{"active":false}` + "\n")

// ServeHTTP implements the endpoint.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := e.introspect(r)
	if err != nil {
		e.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	_, _ = w.Write(body)
}

func (e *Endpoint) introspect(r *http.Request) ([]byte, error) {
	req, err := form.Parse(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	client, err := e.Auth.Authenticate(ctx, req.Creds, clients.SecretBasic, clients.PrivateKeyJWT)
	if err != nil {
		return nil, err
	}
	raw := req.Get("token")
	if raw == "" {
		return nil, oauth.New(oauth.InvalidRequest, "token is required")
	}
	t, err := e.Validator.Verify(ctx, raw)
	if errors.Is(err, accesstoken.ErrInactive) {
		return inactive, nil
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "token validation failed").WithCause(err)
	}
	if !inAudience(t, client.Client) {
		return inactive, nil
	}
	claims, username, err := UserClaims(ctx, e.Directory, t)
	if errors.Is(err, ErrUserGone) {
		return inactive, nil
	}
	if err != nil {
		return nil, err
	}
	// The token's own fields win over a user claim of the same name.
	claims["active"] = true
	claims["aud"] = t.Audience
	claims["client_id"] = t.ClientID
	claims["exp"] = t.ExpiresAt.Unix()
	claims["iat"] = t.IssuedAt.Unix()
	claims["nbf"] = t.NotBefore.Unix()
	claims["iss"] = e.Validator.Issuer
	claims["jti"] = t.ID
	claims["scope"] = strings.Join(t.Scopes, " ")
	claims["token_type"] = "Bearer"
	if t.JKT != "" {
		// RFC 9449 §6.2: the binding, which the resource checks against
		// the proof that came with the token.
		claims["token_type"] = "DPoP"
		claims["cnf"] = map[string]string{"jkt": t.JKT}
	}
	if len(t.AMR) > 0 {
		claims["amr"] = t.AMR
	}
	if acr := oauth.ACR(t.AMR); acr != "" {
		claims["acr"] = acr
	}
	if len(t.Act) > 0 {
		claims["act"] = t.Act // RFC 8693 §4.1: who acts for the subject
	}
	if username != "" {
		claims["username"] = username
	}
	b, err := json.Marshal(claims)
	if err != nil {
		return nil, oauth.New(oauth.ServerError, "internal error").WithCause(err)
	}
	return append(b, '\n'), nil
}

// inAudience: the introspecting client is in the token's audience by its
// project id, or by its client_id when that is the whole audience or the
// client the token was issued to (azp): with several audiences, a client
// id in aud binds only its own client (OIDC Core §2, azp).
func inAudience(t *accesstoken.Token, c *directoryv1.Client) bool {
	if c.GetProjectId() != "" && slices.Contains(t.Audience, c.GetProjectId()) {
		return true
	}
	id := c.GetClientId()
	return id != "" && slices.Contains(t.Audience, id) && (len(t.Audience) == 1 || t.ClientID == id)
}

// writeError renders every error of this endpoint (RFC 6749 §5.2 JSON).
// The seed makes any invalid_client here a 401, so it always carries a
// Basic challenge.
func (e *Endpoint) writeError(w http.ResponseWriter, r *http.Request, err error) {
	oe := oauth.As(err)
	if oe.Code == oauth.InvalidClient && oe.Status != http.StatusUnauthorized {
		c := *oe
		c.Status = http.StatusUnauthorized
		c.Header = http.Header{"Www-Authenticate": {`Basic realm="gatehouse"`}}
		oe = &c
	}
	oauth.Write(w, r, e.Logger, "introspection", oe)
}
