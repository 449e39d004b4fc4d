package clients

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
)

// AuthenticateRPC implements TokenService.AuthenticateClient: the token
// endpoint's authentication of an OIDC application, for another service's
// endpoint (authn's pushed authorization requests). The OAuth error's
// description is the Connect error's message; its cause is not sent.
func (a *Authenticator) AuthenticateRPC(ctx context.Context, req *tokensv1.AuthenticateClientRequest) (*tokensv1.AuthenticateClientResponse, error) {
	cr := Credentials{Basic: req.GetBasic(), BasicUser: req.GetBasicUser(), BasicPass: req.GetBasicPassword(),
		ClientID: req.GetClientId(), ClientSecret: req.GetClientSecret(), Assertion: req.GetClientAssertion(),
		AssertionType: req.GetClientAssertionType()}
	auth, err := a.Authenticate(ctx, cr, SecretBasic, SecretPost, None, PrivateKeyJWT)
	if err != nil {
		e := oauth.As(err)
		code := connect.CodeUnauthenticated
		switch e.Code {
		case oauth.InvalidRequest:
			code = connect.CodeInvalidArgument
		case oauth.TemporarilyUnavailable, oauth.ServerError:
			code = connect.CodeUnavailable
		}
		return nil, connect.NewError(code, errors.New(e.Description))
	}
	return &tokensv1.AuthenticateClientResponse{ClientId: auth.Client.GetClientId()}, nil
}

// maxRequestObject bounds a request object before it is parsed.
const maxRequestObject = 32 << 10

// VerifyRequestObject implements TokenService.VerifyRequestObject with
// the verifier for request objects (audience: the issuer; iss names the
// client, no sub).
func (a *Authenticator) VerifyRequestObject(ctx context.Context, req *tokensv1.VerifyRequestObjectRequest) (*tokensv1.VerifyRequestObjectResponse, error) {
	if a.RequestObjects == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("request objects are not configured"))
	}
	raw := req.GetRequest()
	if req.GetClientId() == "" || raw == "" || len(raw) > maxRequestObject {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("client_id and a request object of at most 32 KiB are required"))
	}
	c, err := a.Cache.Get(ctx, req.GetClientId())
	if errors.Is(err, ErrUnknown) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown client"))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("client lookup failed; retry"))
	}
	if !c.GetActive() || c.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the client is not an active OIDC application"))
	}
	if err := a.verifyJWT(ctx, c, raw, a.RequestObjects); err != nil {
		if !errors.Is(err, assertion.ErrInvalid) {
			return nil, connect.NewError(connect.CodeUnavailable, errors.New("the request object could not be checked; retry"))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(strings.TrimPrefix(err.Error(), assertion.ErrInvalid.Error()+": ")))
	}
	// Verified: the payload is the signed one.
	parts := strings.Split(raw, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || !json.Valid(payload) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the request object's payload is not JSON"))
	}
	return &tokensv1.VerifyRequestObjectResponse{Claims: payload}, nil
}
