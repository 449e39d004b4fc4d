package management

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// ListUserIDPs lists a user's links to identities at identity providers,
// by creation date (ZITADEL's IDPUserLink shape).
func (s *Server) ListUserIDPs(ctx context.Context, req *managementv1.ListUserIDPsRequest) (*managementv1.ListUserIDPsResponse, error) {
	lim, err := apierr.CheckLimits(req) // the maximums of query.limit and user_id are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, req.GetQuery())
	if err := f.Err("USER-invalid-query"); err != nil {
		return nil, err
	}
	// user_id's limit, as ever after the query's problems, and the rest.
	u, err := s.user(ctx, lim, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	links, total, err := s.Users.LinksOfUser(ctx, u.ID, page)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListUserIDPsResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: u.Sequence, ViewTimestamp: timestamppb.New(u.ChangeDate)},
		Result:  make([]*managementv1.IDPUserLink, 0, len(links)),
	}
	for _, l := range links {
		link := &managementv1.IDPUserLink{UserId: u.ID, IdpId: l.IdPID, ProvidedUserId: l.ExternalSubject,
			ProvidedUserName: l.ExternalUserName, IdpType: managementv1.IDPType_IDP_TYPE_OIDC}
		if p, err := s.idpQueries().Get(ctx, u.OrgID, l.IdPID); err == nil {
			link.IdpName = p.Name
		} else if !errors.Is(err, db.ErrNotFound) {
			return nil, err
		}
		out.Result = append(out.Result, link)
	}
	return out, nil
}

// RemoveUserIDP removes a user's link: the identity no longer signs the
// user in.
func (s *Server) RemoveUserIDP(ctx context.Context, req *managementv1.RemoveUserIDPRequest) (*managementv1.RemoveUserIDPResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("idp_id", "idp_id", m.GetIdpId(), 1))
	f.Check(lim.Length("linked_user_id", "linked_user_id", m.GetLinkedUserId(), 1))
	if err := f.Err("USER-invalid-link"); err != nil {
		return nil, err
	}
	// user_id's limit, as ever after the link's problems, and the rest.
	u, err := s.user(ctx, lim, "user_id", m.GetUserId())
	if err != nil {
		return nil, err
	}
	l, err := s.Users.Link(ctx, m.GetIdpId(), m.GetLinkedUserId())
	if errors.Is(err, db.ErrNotFound) || (err == nil && l.UserID != u.ID) {
		return nil, apierr.NotFound("USER-link-not-found", "the user has no such link")
	}
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.RemoveLink(ctx, authz.FromContext(ctx).UserID, u, l)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx)
	return &managementv1.RemoveUserIDPResponse{Details: writeDetails(evs)}, nil
}
