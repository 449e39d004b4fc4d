package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
)

// Tokens is what authn needs of the tokens service's internal API.
type Tokens interface {
	CreateAuthorizationCode(context.Context, *tokensv1.CreateAuthorizationCodeRequest) (*tokensv1.CreateAuthorizationCodeResponse, error)
	CreateImplicitTokens(context.Context, *tokensv1.CreateImplicitTokensRequest) (*tokensv1.CreateImplicitTokensResponse, error)
	VerifyIDTokenHint(context.Context, *tokensv1.VerifyIDTokenHintRequest) (*tokensv1.VerifyIDTokenHintResponse, error)
	RevokeSession(context.Context, *tokensv1.RevokeSessionRequest) (*tokensv1.RevokeSessionResponse, error)
	GetDeviceAuthorization(context.Context, *tokensv1.GetDeviceAuthorizationRequest) (*tokensv1.GetDeviceAuthorizationResponse, error)
	DecideDeviceAuthorization(context.Context, *tokensv1.DecideDeviceAuthorizationRequest) (*tokensv1.DecideDeviceAuthorizationResponse, error)
	AuthenticateClient(context.Context, *tokensv1.AuthenticateClientRequest) (*tokensv1.AuthenticateClientResponse, error)
	VerifyRequestObject(context.Context, *tokensv1.VerifyRequestObjectRequest) (*tokensv1.VerifyRequestObjectResponse, error)
}

// tokensAdapter turns the Connect API into the plain calls the packages
// use; errors stay Connect errors so callers can read their codes.
type tokensAdapter struct{ c Tokens }

var _ authorize.Tokens = tokensAdapter{}

func (a tokensAdapter) CreateAuthorizationCode(ctx context.Context, g authorize.CodeGrant) (string, error) {
	resp, err := a.c.CreateAuthorizationCode(ctx, &tokensv1.CreateAuthorizationCodeRequest{
		ClientId: g.ClientID, RedirectUri: g.RedirectURI, UserId: g.UserID, OrgId: g.OrgID, Scopes: g.Scopes,
		Nonce: g.Nonce, CodeChallenge: g.CodeChallenge, SessionId: g.SessionID, AuthTime: timestamppb.New(g.AuthTime), Amr: g.AMR,
		DpopJkt: g.DPoPJKT,
	})
	if err != nil {
		return "", fmt.Errorf("create authorization code: %w", err)
	}
	return resp.GetCode(), nil
}

func (a tokensAdapter) CreateImplicitTokens(ctx context.Context, g authorize.ImplicitGrant) (authorize.ImplicitTokens, error) {
	resp, err := a.c.CreateImplicitTokens(ctx, &tokensv1.CreateImplicitTokensRequest{
		ClientId: g.ClientID, UserId: g.UserID, OrgId: g.OrgID, Scopes: g.Scopes, Nonce: g.Nonce,
		SessionId: g.SessionID, AuthTime: timestamppb.New(g.AuthTime), Amr: g.AMR, ResponseType: g.ResponseType,
	})
	if err != nil {
		return authorize.ImplicitTokens{}, fmt.Errorf("create implicit tokens: %w", err)
	}
	m := resp
	return authorize.ImplicitTokens{IDToken: m.GetIdToken(), AccessToken: m.GetAccessToken(), ExpiresIn: m.GetExpiresIn(),
		TokenType: m.GetTokenType(), Scope: m.GetScope()}, nil
}

func (a tokensAdapter) VerifyIDTokenHint(ctx context.Context, idToken string, allowExpired bool) (authorize.Hint, error) {
	resp, err := a.c.VerifyIDTokenHint(ctx, &tokensv1.VerifyIDTokenHintRequest{IdToken: idToken, AllowExpired: allowExpired})
	if err != nil {
		return authorize.Hint{}, fmt.Errorf("verify id_token_hint: %w", err)
	}
	m := resp
	h := authorize.Hint{Subject: m.GetSubject(), ClientID: m.GetClientId(), SessionID: m.GetSessionId()}
	if m.GetAuthTime() != nil {
		h.AuthTime = m.GetAuthTime().AsTime()
	}
	if m.GetExpiresAt() != nil {
		h.ExpiresAt = m.GetExpiresAt().AsTime()
	}
	return h, nil
}

func (a tokensAdapter) RevokeSession(ctx context.Context, sessionID string) error {
	if _, err := a.c.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: sessionID}); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

func (a tokensAdapter) DeviceAuthorization(ctx context.Context, userCode string) (authorize.DeviceAuthorization, error) {
	resp, err := a.c.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: userCode})
	if c := connect.CodeOf(err); c == connect.CodeNotFound || c == connect.CodeInvalidArgument {
		return authorize.DeviceAuthorization{}, authorize.ErrNoDevice
	}
	if err != nil {
		return authorize.DeviceAuthorization{}, fmt.Errorf("find device authorization: %w", err)
	}
	return authorize.DeviceAuthorization{ID: resp.GetDeviceId(), ClientID: resp.GetClientId(), Scopes: resp.GetScopes(),
		UserCode: resp.GetUserCode()}, nil
}

func (a tokensAdapter) DecideDevice(ctx context.Context, d authorize.DeviceDecision) error {
	req := &tokensv1.DecideDeviceAuthorizationRequest{DeviceId: d.ID, Approve: d.Approve}
	if d.Approve {
		req.UserId, req.OrgId, req.SessionId, req.AuthTime, req.Amr = d.UserID, d.OrgID, d.SessionID, timestamppb.New(d.AuthTime), d.AMR
	}
	_, err := a.c.DecideDeviceAuthorization(ctx, req)
	if connect.CodeOf(err) == connect.CodeNotFound {
		return authorize.ErrNoDevice
	}
	if err != nil {
		return fmt.Errorf("decide device authorization: %w", err)
	}
	return nil
}

func (a tokensAdapter) AuthenticateClient(ctx context.Context, c authorize.ClientCredentials) (authorize.AuthenticatedClient, error) {
	resp, err := a.c.AuthenticateClient(ctx, &tokensv1.AuthenticateClientRequest{Basic: c.Basic, BasicUser: c.BasicUser,
		BasicPassword: c.BasicPass, ClientId: c.ClientID, ClientSecret: c.ClientSecret,
		ClientAssertionType: c.ClientAssertionType, ClientAssertion: c.ClientAssertion, DpopProofs: c.DPoPProofs})
	if err == nil {
		if code := resp.GetDpopError(); code != "" {
			e := oauth.New(code, "%s", resp.GetDpopErrorDescription())
			if n := resp.GetDpopNonce(); n != "" {
				e.Header = http.Header{"Dpop-Nonce": {n}}
			}
			return authorize.AuthenticatedClient{}, e
		}
		return authorize.AuthenticatedClient{ClientID: resp.GetClientId(), DPoPJKT: resp.GetDpopJkt(), DPoPNonce: resp.GetDpopNonce()}, nil
	}
	var ce *connect.Error
	msg := "client authentication failed"
	if errors.As(err, &ce) && ce.Message() != "" {
		msg = ce.Message()
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		return authorize.AuthenticatedClient{}, oauth.New(oauth.InvalidRequest, "%s", msg)
	case connect.CodeUnauthenticated:
		return authorize.AuthenticatedClient{}, oauth.InvalidClientError(c.Basic, "%s", msg)
	}
	return authorize.AuthenticatedClient{}, oauth.New(oauth.TemporarilyUnavailable, "client authentication is unavailable; retry").WithCause(err)
}

func (a tokensAdapter) VerifyRequestObject(ctx context.Context, clientID, request string) ([]byte, error) {
	resp, err := a.c.VerifyRequestObject(ctx, &tokensv1.VerifyRequestObjectRequest{ClientId: clientID, Request: request})
	if err == nil {
		return resp.GetClaims(), nil
	}
	var ce *connect.Error
	if c := connect.CodeOf(err); (c == connect.CodeInvalidArgument || c == connect.CodeNotFound || c == connect.CodeFailedPrecondition) &&
		errors.As(err, &ce) {
		return nil, fmt.Errorf("%w: %s", authorize.ErrRequestObject, ce.Message())
	}
	return nil, fmt.Errorf("verify request object: %w", err)
}
