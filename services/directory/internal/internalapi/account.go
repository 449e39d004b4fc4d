package internalapi

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// The account page's calls: a signed-in user's own credentials. authn
// calls them only for the user of the browser's session; the removals
// by the user itself keep the user's sessions (an admin's end them).

// maxLinks bounds the links one account lists (an organization has few
// identity providers).
const maxLinks = 100

// GetAccount lists the user's factors, recovery codes and links.
func (s *Server) GetAccount(ctx context.Context, req *directoryv1.GetAccountRequest) (*directoryv1.GetAccountResponse, error) {
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	fs, err := s.users.Factors(ctx, u.ID)
	if err != nil {
		return nil, internalErr(err, "list factors")
	}
	out := &directoryv1.GetAccountResponse{}
	for _, f := range fs {
		out.Factors = append(out.Factors, &directoryv1.AccountFactor{Id: f.ID, Type: f.Type, Name: f.Name, Ready: f.Ready(),
			CreationDate: timestamppb.New(f.CreationDate)})
	}
	left, err := s.users.RecoveryCodesLeft(ctx, u.ID)
	if err != nil {
		return nil, internalErr(err, "count recovery codes")
	}
	out.RecoveryCodesLeft = int32(left)
	links, _, err := s.users.LinksOfUser(ctx, u.ID, users.Page{Limit: maxLinks})
	if err != nil {
		return nil, internalErr(err, "list links")
	}
	for _, l := range links {
		name := l.IdPID
		if p, err := s.idpByID(ctx, l.IdPID); err == nil {
			name = p.Name
		} else if connect.CodeOf(err) != connect.CodeNotFound {
			return nil, err
		}
		out.Links = append(out.Links, &directoryv1.AccountLink{IdpId: l.IdPID, IdpName: name, ExternalUserName: l.ExternalUserName})
	}
	return out, nil
}

// RemoveAccountFactor removes one of the user's own factors.
func (s *Server) RemoveAccountFactor(ctx context.Context, req *directoryv1.RemoveAccountFactorRequest) (*directoryv1.RemoveAccountFactorResponse, error) {
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	switch req.GetType() {
	case users.FactorOTP:
		_, err = s.userCmds.RemoveTOTP(ctx, u.ID, u, false)
	case users.FactorU2F, users.FactorPasswordless:
		_, err = s.userCmds.RemoveWebAuthn(ctx, u.ID, u, req.GetType(), req.GetId(), false)
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(`type must be "otp", "u2f" or "passwordless"`))
	}
	if err != nil {
		return nil, asConnect(err, "remove factor")
	}
	return &directoryv1.RemoveAccountFactorResponse{}, nil
}

// UnlinkAccount removes the user's link to an identity provider.
func (s *Server) UnlinkAccount(ctx context.Context, req *directoryv1.UnlinkAccountRequest) (*directoryv1.UnlinkAccountResponse, error) {
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	l, err := s.users.LinkOfUser(ctx, u.ID, req.GetIdpId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("link")
	}
	if err != nil {
		return nil, internalErr(err, "get link")
	}
	if _, err := s.userCmds.RemoveLink(ctx, u.ID, u, l); err != nil {
		return nil, asConnect(err, "unlink")
	}
	s.deliverCutoffs(ctx)
	return &directoryv1.UnlinkAccountResponse{}, nil
}

// EndUserSessions signs the user out everywhere.
func (s *Server) EndUserSessions(ctx context.Context, req *directoryv1.EndUserSessionsRequest) (*directoryv1.EndUserSessionsResponse, error) {
	u, err := s.human(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if _, err := s.userCmds.SignOutEverywhere(ctx, u.ID, u); err != nil {
		return nil, asConnect(err, "sign out everywhere")
	}
	s.deliverCutoffs(ctx)
	return &directoryv1.EndUserSessionsResponse{}, nil
}

// deliverCutoffs delivers the token revocations just queued.
func (s *Server) deliverCutoffs(ctx context.Context) {
	if s.Cutoffs != nil {
		s.Cutoffs.DeliverNow(ctx)
	}
}
