package management

import (
	"context"
	"time"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// AddMachineKey adds a key to a machine user. With public_key only that
// key is registered; without, an RSA key pair is generated and its private
// key returned once in key_details (the JSON key file). Only public keys
// are stored. A human user is NotFound.
func (s *Server) AddMachineKey(ctx context.Context, req *managementv1.AddMachineKeyRequest) (*managementv1.AddMachineKeyResponse, error) {
	m := req
	now := s.Now()
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	if m.GetType() != managementv1.KeyType_KEY_TYPE_JSON {
		f.Add("type", "must be KEY_TYPE_JSON")
	}
	var exp time.Time
	if m.ExpirationDate != nil {
		if err := m.GetExpirationDate().CheckValid(); err != nil {
			f.Add("expiration_date", "is not a valid timestamp")
		} else if exp = m.GetExpirationDate().AsTime(); !exp.After(now) {
			f.Add("expiration_date", "must be in the future")
		}
	}
	var pub string
	if len(m.GetPublicKey()) > 0 {
		var err error
		if pub, err = users.ParsePublicKey(m.GetPublicKey()); err != nil {
			f.Add("public_key", err.Error())
		}
	}
	lim.ReportedIn(f, "public_key") // users.ParsePublicKey words it; bootstrap uses it too
	if err := f.Err("USER-invalid-key"); err != nil {
		return nil, err
	}
	// user_id's limit, as ever after the key's problems, and the rest.
	u, err := s.user(ctx, lim, "user_id", m.GetUserId())
	if err != nil {
		return nil, err
	}
	keyID, keyFile, evs, err := s.UserCmds.AddMachineKey(ctx, authz.FromContext(ctx).UserID, u, pub, exp, now)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddMachineKeyResponse{KeyId: keyID, KeyDetails: keyFile, Details: writeDetails(evs)}, nil
}
