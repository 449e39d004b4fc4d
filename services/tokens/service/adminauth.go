package service

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
)

// adminAudience is the audience of the management and admin APIs.
const adminAudience = "gatehouse"

// errDirectoryUnavailable: the directory could not answer (its detail is
// not for the caller).
var errDirectoryUnavailable = connect.NewError(connect.CodeUnavailable, errors.New("the user directory is unavailable; retry"))

// adminAuthorizer admits IAM_OWNERs to the admin API: the bearer token is
// validated locally (it is one of ours) and must carry the admin audience;
// the role comes from the directory.
type adminAuthorizer struct {
	tokens *introspection.Validator
	dir    Directory
}

func (a *adminAuthorizer) IAMOwner(ctx context.Context, bearer string) error {
	t, err := a.tokens.Validate(ctx, bearer)
	if errors.Is(err, introspection.ErrInactive) || (err == nil && !slices.Contains(t.Audience, adminAudience)) {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the access token is invalid or not for the admin API"))
	}
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	u, err := a.dir.GetUser(ctx, connect.NewRequest(&directoryv1.GetUserRequest{UserId: t.Subject}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the token's user is unknown"))
	}
	if err != nil {
		// The directory cannot answer: a dependency failure, never a 401.
		return errDirectoryUnavailable
	}
	if u.Msg.GetUser().GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the token's user is not active"))
	}
	roles, err := a.dir.GetRoles(ctx, connect.NewRequest(&directoryv1.GetRolesRequest{UserId: t.Subject, OrgId: u.Msg.GetUser().GetOrgId()}))
	if err != nil {
		return errDirectoryUnavailable
	}
	if !slices.Contains(roles.Msg.GetRoles(), "IAM_OWNER") {
		return connect.NewError(connect.CodePermissionDenied, errors.New("IAM_OWNER required"))
	}
	return nil
}
