package service

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
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
	tokens *accesstoken.Verifier
	dir    Directory
}

func (a *adminAuthorizer) IAMOwner(ctx context.Context, bearer string) error {
	t, err := a.tokens.Verify(ctx, bearer)
	if errors.Is(err, accesstoken.ErrInactive) || (err == nil && (!slices.Contains(t.Audience, adminAudience) || t.JKT != "")) {
		// A DPoP-bound token is refused: the admin API checks no proof.
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the access token is invalid, DPoP-bound or not for the admin API"))
	}
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	u, err := a.dir.GetUser(ctx, &directoryv1.GetUserRequest{UserId: t.Subject})
	if connect.CodeOf(err) == connect.CodeNotFound {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the token's user is unknown"))
	}
	if err != nil {
		// The directory cannot answer: a dependency failure, never a 401.
		return errDirectoryUnavailable
	}
	if u.GetUser().GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the token's user is not active"))
	}
	if err := a.managementClient(ctx, t); err != nil {
		return err
	}
	roles, err := a.dir.GetRoles(ctx, &directoryv1.GetRolesRequest{UserId: t.Subject, OrgId: u.GetUser().GetOrgId()})
	if err != nil {
		return errDirectoryUnavailable
	}
	if !slices.Contains(roles.GetRoles(), "IAM_OWNER") {
		return connect.NewError(connect.CodePermissionDenied, errors.New("IAM_OWNER required"))
	}
	return nil
}

// managementClient refuses a token whose client may no longer hold the
// admin audience: it counts when issued to the machine user itself, or to
// an app that is an admin client now (asked of the directory, not a cache:
// an IAM owner's unmarking ends its tokens at once).
func (a *adminAuthorizer) managementClient(ctx context.Context, t *accesstoken.Token) error {
	if t.ClientID == t.Subject {
		return nil
	}
	c, err := a.dir.GetClient(ctx, &directoryv1.GetClientRequest{ClientId: t.ClientID})
	if connect.CodeOf(err) == connect.CodeNotFound {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the token's client no longer exists"))
	}
	if err != nil {
		return errDirectoryUnavailable
	}
	cl := c.GetClient()
	own := cl.GetKind() == directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER && cl.GetId() == t.Subject
	if !own && !cl.GetAdminClient() {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("the token's client is no longer an admin client"))
	}
	return nil
}
