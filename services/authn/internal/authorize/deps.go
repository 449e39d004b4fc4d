package authorize

import (
	"context"
	"errors"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// Directory is what the authorization endpoint needs of the directory.
type Directory interface {
	GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error)
	GetOrg(context.Context, *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error)
	GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error)
	GetIdP(context.Context, *directoryv1.GetIdPRequest) (*directoryv1.GetIdPResponse, error)
}

// CodeGrant is what an authorization code is bound to.
type CodeGrant struct {
	ClientID      string
	RedirectURI   string
	UserID        string
	OrgID         string
	Scopes        []string
	Nonce         string
	CodeChallenge string // S256; empty when the client sent none
	DPoPJKT       string // the DPoP key the code is bound to; "" none
	SessionID     string
	AuthTime      time.Time
	AMR           []string
}

// ImplicitGrant asks for the tokens of an implicit response.
type ImplicitGrant struct {
	ClientID     string
	UserID       string
	OrgID        string
	Scopes       []string
	Nonce        string
	SessionID    string
	AuthTime     time.Time
	AMR          []string
	ResponseType string // "id_token" or "id_token token"
}

// ImplicitTokens are the tokens of an implicit response.
type ImplicitTokens struct {
	IDToken     string
	AccessToken string // empty for response_type id_token
	ExpiresIn   int64
	TokenType   string
	Scope       string
}

// Hint is a verified id_token_hint.
type Hint struct {
	Subject   string
	ClientID  string // azp
	SessionID string // sid
	AuthTime  time.Time
	ExpiresAt time.Time
}

// Tokens is what authn needs of the tokens service. Errors are Connect
// errors: InvalidArgument (or Unauthenticated) for a token that is not a
// valid ID token of this issuer.
type Tokens interface {
	CreateAuthorizationCode(ctx context.Context, g CodeGrant) (code string, err error)
	CreateImplicitTokens(ctx context.Context, g ImplicitGrant) (ImplicitTokens, error)
	VerifyIDTokenHint(ctx context.Context, idToken string, allowExpired bool) (Hint, error)
	RevokeSession(ctx context.Context, sessionID string) error
	// DeviceAuthorization finds the pending device authorization a user
	// code names: ErrNoDevice for a malformed, unknown, expired or decided
	// code.
	DeviceAuthorization(ctx context.Context, userCode string) (DeviceAuthorization, error)
	// DecideDevice records the person's decision; ErrNoDevice when the
	// authorization is no longer pending.
	DecideDevice(ctx context.Context, d DeviceDecision) error
	// AuthenticateClient authenticates a client by the credentials it sent
	// (the token endpoint's methods), then checks its DPoP proof, if any;
	// errors are OAuth errors (invalid_client, invalid_request,
	// invalid_dpop_proof, use_dpop_nonce with the DPoP-Nonce header, or
	// temporarily_unavailable).
	AuthenticateClient(ctx context.Context, c ClientCredentials) (AuthenticatedClient, error)
	// VerifyRequestObject verifies a request object of clientID (RFC 9101)
	// and returns its claims (a JSON object); ErrRequestObject wraps the
	// reason it is refused.
	VerifyRequestObject(ctx context.Context, clientID, request string) ([]byte, error)
}

// ErrRequestObject wraps why a request object is refused.
var ErrRequestObject = errors.New("invalid request object")

// ClientCredentials are what a client sent to authenticate (RFC 6749
// §2.3, RFC 7523 §2.2).
type ClientCredentials struct {
	Basic                bool
	BasicUser, BasicPass string
	ClientID             string
	ClientSecret         string
	ClientAssertionType  string
	ClientAssertion      string
	// DPoPProofs are the request's DPoP header values (RFC 9449 §10.1).
	DPoPProofs []string
}

// AuthenticatedClient is an authenticated client and the DPoP key its
// request proved ("" without a proof).
type AuthenticatedClient struct {
	ClientID, DPoPJKT string
	// DPoPNonce is the server's current DPoP nonce, if it issues nonces.
	DPoPNonce string
}

// ErrNoDevice: no pending device authorization has this user code (or id).
var ErrNoDevice = errors.New("no pending device authorization")

// DeviceAuthorization is a pending device authorization.
type DeviceAuthorization struct {
	ID       string
	ClientID string
	Scopes   []string
	UserCode string // XXXX-XXXX
}

// DeviceDecision is a person's decision on a device authorization; the
// login fields count only when Approve is set.
type DeviceDecision struct {
	ID        string
	Approve   bool
	UserID    string
	OrgID     string
	SessionID string
	AuthTime  time.Time
	AMR       []string
}
