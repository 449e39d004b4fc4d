package internalapi

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// GetMachineKey returns a machine user's public key by key id, for the JWT
// profile grant. Expired keys are returned with their expiry; the tokens
// service refuses them.
func (s *Server) GetMachineKey(ctx context.Context, req *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error) {
	k, err := s.users.MachineKey(ctx, req.GetKeyId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("key")
	}
	if err != nil {
		return nil, internalErr(err, "get machine key")
	}
	u, err := s.users.Get(ctx, k.UserID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("key")
	}
	if err != nil {
		return nil, internalErr(err, "get machine user")
	}
	pk := &directoryv1.PublicKey{KeyId: k.ID, PublicKeyPem: k.PublicKey}
	if k.ExpirationDate != nil && !k.ExpirationDate.Equal(users.NoExpiry) {
		pk.ExpiresAt = timestamppb.New(*k.ExpirationDate)
	}
	projectIDs, err := (&projects.Queries{DB: s.ES.DB()}).ActiveProjectIDs(ctx, u.OrgID)
	if err != nil {
		return nil, internalErr(err, "projects of the machine user's organization")
	}
	return &directoryv1.GetMachineKeyResponse{Key: pk, User: userProto(u), OrgProjectIds: projectIDs}, nil
}

// machineClient renders a machine user with a secret as a client.
func machineClient(u *users.User) *directoryv1.Client {
	tt := directoryv1.TokenType_TOKEN_TYPE_OPAQUE
	if u.AccessTokenType == 1 {
		tt = directoryv1.TokenType_TOKEN_TYPE_JWT
	}
	return &directoryv1.Client{
		ClientId:        u.ClientID.String,
		Kind:            directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER,
		Id:              u.ID,
		OrgId:           u.OrgID,
		Active:          u.State == users.StateActive,
		AuthMethod:      directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC,
		SecretHash:      u.SecretHash,
		AccessTokenType: tt,
		Sequence:        u.Sequence,
		Name:            u.MachineName,
	}
}

// GetClient returns an OAuth client by client_id: an application, or a
// machine user with a client secret.
func (s *Server) GetClient(ctx context.Context, req *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	id := req.GetClientId()
	if c, err := s.appClient(ctx, id); err != nil || c != nil {
		if err != nil {
			return nil, internalErr(err, "get app client")
		}
		return &directoryv1.GetClientResponse{Client: c}, nil
	}
	u, err := s.users.ByClientID(ctx, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("client")
	}
	if err != nil {
		return nil, internalErr(err, "get client")
	}
	c := machineClient(u)
	if c.OrgProjectIds, err = (&projects.Queries{DB: s.ES.DB()}).ActiveProjectIDs(ctx, u.OrgID); err != nil {
		return nil, internalErr(err, "projects of the machine user's organization")
	}
	return &directoryv1.GetClientResponse{Client: c}, nil
}
