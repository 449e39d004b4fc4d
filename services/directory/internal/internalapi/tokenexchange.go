package internalapi

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// DominanceFunc reports whether actor holds every role target holds
// (authz.Dominates over the projections).
type DominanceFunc func(ctx context.Context, actorID, targetID string) (bool, error)

var errImpersonation = connect.NewError(connect.CodePermissionDenied,
	errors.New("impersonation refused: the organization must enable it and the caller must hold ORG_END_USER_IMPERSONATOR and every role of the user"))

// AuthorizeTokenExchange checks a token exchange and records it (see the
// proto). Every refusal of an impersonation is the same PermissionDenied.
func (s *Server) AuthorizeTokenExchange(ctx context.Context, req *directoryv1.AuthorizeTokenExchangeRequest) (*directoryv1.AuthorizeTokenExchangeResponse, error) {
	if req.GetSubjectUserId() == "" || req.GetClientId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("subject_user_id and client_id are required"))
	}
	u, err := s.users.Get(ctx, req.GetSubjectUserId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("user")
	}
	if err != nil {
		return nil, internalErr(err, "get user")
	}
	if u.State != users.StateActive {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the user is not active"))
	}
	if req.GetImpersonation() {
		if err := s.mayImpersonate(ctx, req.GetCallerUserId(), u); err != nil {
			return nil, err
		}
	}
	editor := req.GetCallerUserId()
	if editor == "" {
		editor = req.GetClientId()
	}
	err = s.userCmds.RecordTokenExchange(ctx, editor, u.OrgID, users.TokenExchanged{
		SubjectUserID: u.ID, ClientID: req.GetClientId(), CallerUserID: req.GetCallerUserId(), ActorUserID: req.GetActorUserId(),
		Impersonation: req.GetImpersonation(), Audience: req.GetAudience(), Scopes: req.GetScopes(),
		SubjectTokenType: req.GetSubjectTokenType(), RequestedTokenType: req.GetRequestedTokenType(),
	})
	if err != nil {
		return nil, internalErr(err, "record token exchange")
	}
	return &directoryv1.AuthorizeTokenExchangeResponse{OrgId: u.OrgID}, nil
}

// mayImpersonate: the subject's organization enables impersonation, and
// the caller is an active machine user holding RoleImpersonator there (as
// granted, not implied by another role) and every role of the subject.
func (s *Server) mayImpersonate(ctx context.Context, callerID string, subject *users.User) error {
	if callerID == "" || callerID == subject.ID || s.Dominance == nil {
		return errImpersonation
	}
	p, err := s.orgs.OwnSecurityPolicy(ctx, subject.OrgID)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return internalErr(err, "get security policy")
	}
	if err != nil || !p.EnableImpersonation {
		return errImpersonation
	}
	caller, err := s.users.Get(ctx, callerID)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return internalErr(err, "get caller")
	}
	if err != nil || caller.State != users.StateActive || caller.Type != users.TypeMachine {
		return errImpersonation
	}
	m, err := s.orgs.Member(ctx, subject.OrgID, callerID)
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return internalErr(err, "get membership")
	}
	if err != nil || !slices.Contains(m.Roles(), orgs.RoleImpersonator) {
		return errImpersonation
	}
	ok, err := s.Dominance(ctx, callerID, subject.ID)
	if err != nil {
		return internalErr(err, "role dominance")
	}
	if !ok {
		return errImpersonation
	}
	return nil
}
