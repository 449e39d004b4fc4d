package admin

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/admin/v1/adminv1connect"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// server implements the AdminService's procedures.
type server struct {
	adminv1connect.UnimplementedAdminServiceHandler
	keys KeyManager
}

var _ adminv1connect.AdminServiceHandler = (*server)(nil)

// RotateSigningKey creates the next signing key. An unset or empty
// algorithm means the configured one.
func (s *server) RotateSigningKey(ctx context.Context, req *adminv1.RotateSigningKeyRequest) (*adminv1.RotateSigningKeyResponse, error) {
	alg := req.GetAlgorithm()
	if alg != "" {
		if err := keys.CheckAlgorithm(alg); err != nil {
			return nil, invalidAlgorithm(err)
		}
	}
	k, err := s.keys.Rotate(ctx, alg)
	switch {
	case errors.Is(err, keys.ErrUnsupportedAlgorithm):
		return nil, invalidAlgorithm(err)
	case errors.Is(err, keys.ErrConcurrentRotation):
		return nil, newError(connect.CodeAborted, "ADMIN-concurrent-rotation", "another key rotation happened at the same time; retry")
	case err != nil:
		return nil, err
	}
	return &adminv1.RotateSigningKeyResponse{
		KeyId:     k.ID,
		Algorithm: k.Algorithm,
		PublishAt: timestamppb.New(k.CreatedAt),
		SignFrom:  timestamppb.New(k.SignFrom),
	}, nil
}

func invalidAlgorithm(err error) error {
	return newError(connect.CodeInvalidArgument, "ADMIN-invalid-algorithm", err.Error())
}

// ListSigningKeys lists the published and scheduled keys, newest first.
func (s *server) ListSigningKeys(ctx context.Context, _ *adminv1.ListSigningKeysRequest) (*adminv1.ListSigningKeysResponse, error) {
	ks, err := s.keys.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &adminv1.ListSigningKeysResponse{Keys: make([]*adminv1.SigningKey, 0, len(ks))}
	for _, k := range ks {
		out.Keys = append(out.Keys, &adminv1.SigningKey{
			KeyId:     k.ID,
			Algorithm: k.Algorithm,
			State:     state(k.State),
			Created:   timestamppb.New(k.CreatedAt),
			SignFrom:  timestamppb.New(k.SignFrom),
			Expires:   expires(k),
		})
	}
	return out, nil
}

func state(s keys.State) adminv1.SigningKeyState {
	switch s {
	case keys.StateScheduled:
		return adminv1.SigningKeyState_SIGNING_KEY_STATE_SCHEDULED
	case keys.StatePublished:
		return adminv1.SigningKeyState_SIGNING_KEY_STATE_PUBLISHED
	case keys.StateActive:
		return adminv1.SigningKeyState_SIGNING_KEY_STATE_ACTIVE
	case keys.StateRetired:
		return adminv1.SigningKeyState_SIGNING_KEY_STATE_RETIRED
	}
	return adminv1.SigningKeyState_SIGNING_KEY_STATE_UNSPECIFIED
}

// expires is set once the key no longer signs, as the API documents
// ("unset while the key is still in use for signing").
func expires(k keys.KeyInfo) *timestamppb.Timestamp {
	if k.State != keys.StateRetired || k.ExpiresAt.IsZero() {
		return nil
	}
	return timestamppb.New(k.ExpiresAt.In(time.UTC))
}
