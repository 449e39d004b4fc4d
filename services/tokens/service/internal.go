package service

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/jwks"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
)

// internalAPI is the internal TokenService: introspection for directory,
// and for authn the login's tokens (codes, implicit tokens, id_token_hint,
// session revocation).
type internalAPI struct {
	tokensv1connect.UnimplementedTokenServiceHandler
	validator *accesstoken.Verifier
	life      *lifecycle.Lifecycle
	revoked   *revocation.List
	keySet    *jwks.Handler
	clients   *clients.Authenticator
	// dpop checks the proofs of pushed authorization requests at parURL
	// (nil: DPoP is off).
	dpop   *dpop.Verifier
	parURL string
}

var _ tokensv1connect.TokenServiceHandler = (*internalAPI)(nil)

func (a *internalAPI) Introspect(ctx context.Context, req *tokensv1.IntrospectRequest) (*tokensv1.IntrospectResponse, error) {
	return introspection.Internal(ctx, a.validator, req)
}

func (a *internalAPI) CreateAuthorizationCode(ctx context.Context, req *tokensv1.CreateAuthorizationCodeRequest) (*tokensv1.CreateAuthorizationCodeResponse, error) {
	return a.life.CreateAuthorizationCode(ctx, req)
}

func (a *internalAPI) CreateImplicitTokens(ctx context.Context, req *tokensv1.CreateImplicitTokensRequest) (*tokensv1.CreateImplicitTokensResponse, error) {
	return a.life.CreateImplicitTokens(ctx, req)
}

func (a *internalAPI) VerifyIDTokenHint(ctx context.Context, req *tokensv1.VerifyIDTokenHintRequest) (*tokensv1.VerifyIDTokenHintResponse, error) {
	return a.life.VerifyIDTokenHint(ctx, req)
}

func (a *internalAPI) RevokeSession(ctx context.Context, req *tokensv1.RevokeSessionRequest) (*tokensv1.RevokeSessionResponse, error) {
	return a.life.RevokeSession(ctx, req)
}

func (a *internalAPI) RevokeUserTokens(ctx context.Context, req *tokensv1.RevokeUserTokensRequest) (*tokensv1.RevokeUserTokensResponse, error) {
	return a.life.RevokeUserTokens(ctx, req)
}

func (a *internalAPI) RevokeGrantTokens(ctx context.Context, req *tokensv1.RevokeGrantTokensRequest) (*tokensv1.RevokeGrantTokensResponse, error) {
	return a.life.RevokeGrantTokens(ctx, req)
}

func (a *internalAPI) RevokeImpersonations(ctx context.Context, req *tokensv1.RevokeImpersonationsRequest) (*tokensv1.RevokeImpersonationsResponse, error) {
	return a.life.RevokeImpersonations(ctx, req)
}

func (a *internalAPI) ListRevocations(ctx context.Context, req *tokensv1.ListRevocationsRequest) (*tokensv1.ListRevocationsResponse, error) {
	entries, cursor, more, err := a.revoked.Feed(ctx, req.GetCursor())
	if errors.Is(err, revocation.ErrInvalidCursor) {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	out := &tokensv1.ListRevocationsResponse{Cursor: cursor, More: more}
	for _, e := range entries {
		out.Revocations = append(out.Revocations, &tokensv1.Revocation{Id: e.ID, ExpiresAt: timestamppb.New(e.ExpiresAt)})
	}
	return out, nil
}

func (a *internalAPI) CheckRevoked(ctx context.Context, req *tokensv1.CheckRevokedRequest) (*tokensv1.CheckRevokedResponse, error) {
	m := req
	if m.GetTokenId() == "" || len(m.GetTokenId()) > 200 || m.GetSubject() == "" || len(m.GetSubject()) > 200 ||
		m.GetExpiresAt() == nil || m.GetExpiresAt().CheckValid() != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("token_id, subject and expires_at are required"))
	}
	revoked, err := a.revoked.TokenRevoked(ctx, m.GetTokenId(), m.GetSubject(), m.GetExpiresAt().AsTime())
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	return &tokensv1.CheckRevokedResponse{Revoked: revoked}, nil
}

func (a *internalAPI) GetKeySet(context.Context, *tokensv1.GetKeySetRequest) (*tokensv1.GetKeySetResponse, error) {
	body, err := a.keySet.Body()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return &tokensv1.GetKeySetResponse{Jwks: body}, nil
}

func (a *internalAPI) GetDeviceAuthorization(ctx context.Context, req *tokensv1.GetDeviceAuthorizationRequest) (*tokensv1.GetDeviceAuthorizationResponse, error) {
	return a.life.GetDeviceAuthorization(ctx, req)
}

func (a *internalAPI) DecideDeviceAuthorization(ctx context.Context, req *tokensv1.DecideDeviceAuthorizationRequest) (*tokensv1.DecideDeviceAuthorizationResponse, error) {
	return a.life.DecideDeviceAuthorization(ctx, req)
}

// AuthenticateClient authenticates the client of a pushed authorization
// request, then checks the request's DPoP proof for POST at parURL, if any
// (RFC 9449 §10.1): its key's thumbprint, or why it is refused.
func (a *internalAPI) AuthenticateClient(ctx context.Context, req *tokensv1.AuthenticateClientRequest) (*tokensv1.AuthenticateClientResponse, error) {
	res, err := a.clients.AuthenticateRPC(ctx, req)
	proofs := req.GetDpopProofs()
	if err != nil || len(proofs) == 0 {
		return res, err
	}
	refuse := func(code, desc string) (*tokensv1.AuthenticateClientResponse, error) {
		res.DpopError, res.DpopErrorDescription = code, desc
		return res, nil
	}
	if a.dpop == nil {
		return refuse(oauth.InvalidDPoPProof, "DPoP is not enabled on this server")
	}
	if a.dpop.Nonces != nil {
		res.DpopNonce = a.dpop.Nonces.Current()
	}
	if len(proofs) > 1 {
		return refuse(oauth.InvalidDPoPProof, "more than one DPoP header")
	}
	p, err := a.dpop.Verify(ctx, proofs[0], dpop.Request{Method: http.MethodPost, URL: a.parURL})
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		return refuse(oauth.UseDPoPNonce, "Authorization server requires nonce in DPoP proof")
	case errors.Is(err, dpop.ErrInvalid):
		return refuse(oauth.InvalidDPoPProof, "the DPoP proof is invalid")
	case err != nil:
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	res.DpopJkt = p.JKT
	return res, nil
}

func (a *internalAPI) VerifyRequestObject(ctx context.Context, req *tokensv1.VerifyRequestObjectRequest) (*tokensv1.VerifyRequestObjectResponse, error) {
	return a.clients.VerifyRequestObject(ctx, req)
}
