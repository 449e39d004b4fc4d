package introspection

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

// Internal implements the internal TokenService.Introspect.
func Internal(ctx context.Context, v *accesstoken.Verifier, req *tokensv1.IntrospectRequest) (*tokensv1.IntrospectResponse, error) {
	t, err := v.Verify(ctx, req.GetToken())
	if errors.Is(err, accesstoken.ErrInactive) {
		return &tokensv1.IntrospectResponse{}, nil
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	if aud := req.GetAudience(); aud != "" && !slices.Contains(t.Audience, aud) {
		return &tokensv1.IntrospectResponse{}, nil
	}
	return &tokensv1.IntrospectResponse{
		Active:    true,
		Subject:   t.Subject,
		ClientId:  t.ClientID,
		Scopes:    t.Scopes,
		Audience:  t.Audience,
		ExpiresAt: timestamppb.New(t.ExpiresAt),
		IssuedAt:  timestamppb.New(t.IssuedAt),
		OrgId:     t.OrgID,
		TokenId:   t.ID,
		Jkt:       t.JKT,
	}, nil
}
