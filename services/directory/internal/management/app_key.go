package management

import (
	"context"
	"errors"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// AddAppKey registers a public key for an application using
// private_key_jwt (OIDC or API). Without public_key an RSA key pair is
// generated and the key file with the private key is in this response only;
// only the public key is stored.
func (s *Server) AddAppKey(ctx context.Context, req *managementv1.AddAppKeyRequest) (*managementv1.AddAppKeyResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	checkAppIDs(&f, lim, m.GetProjectId(), m.GetAppId())
	if m.GetType() != managementv1.KeyType_KEY_TYPE_JSON {
		f.Add("type", "must be KEY_TYPE_JSON")
	}
	var expiration *time.Time
	if m.GetExpirationDate() != nil {
		if err := m.GetExpirationDate().CheckValid(); err != nil {
			f.Add("expiration_date", "is not a valid timestamp")
		} else if t := m.GetExpirationDate().AsTime(); !t.After(appKeyNow(s)) {
			f.Add("expiration_date", "must be in the future")
		} else {
			expiration = &t
		}
	}
	var public string
	if len(m.GetPublicKey()) > 0 {
		pem, err := projects.ParsePublicKey(m.GetPublicKey())
		var ke *projects.KeyError
		switch {
		case errors.As(err, &ke):
			f.Add("public_key", ke.Msg)
		case err != nil:
			return nil, err
		}
		public = pem
	}
	lim.ReportedIn(f, "public_key") // projects.ParsePublicKey words it
	lim.Rest(&f)
	if err := f.Err("APP-key-invalid"); err != nil {
		return nil, err
	}
	p, a, err := s.app(ctx, m.GetProjectId(), m.GetAppId())
	if err != nil {
		return nil, err
	}
	id, keyFile, evs, err := s.projectCommands().AddKey(ctx, authz.FromContext(ctx).UserID, p, a, public, expiration)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddAppKeyResponse{Id: id, Details: writeDetails(evs), KeyDetails: keyFile}, nil
}

// appKeyNow is the server's clock (Now when set).
func appKeyNow(s *Server) time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// RemoveAppKey removes a key of an application.
func (s *Server) RemoveAppKey(ctx context.Context, req *managementv1.RemoveAppKeyRequest) (*managementv1.RemoveAppKeyResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the ids' maximum length is in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	checkAppIDs(&f, lim, m.GetProjectId(), m.GetAppId())
	f.Check(lim.Length("key_id", "key_id", m.GetKeyId(), 1))
	lim.Rest(&f)
	if err := f.Err("APP-key-invalid-id"); err != nil {
		return nil, err
	}
	p, a, err := s.app(ctx, m.GetProjectId(), m.GetAppId())
	if err != nil {
		return nil, err
	}
	k, err := s.projectQueries().Key(ctx, a.ID, m.GetKeyId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("APP-key-not-found", "application key not found")
	}
	if err != nil {
		return nil, err
	}
	evs, err := s.projectCommands().RemoveKey(ctx, authz.FromContext(ctx).UserID, p, a, k)
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveAppKeyResponse{Details: writeDetails(evs)}, nil
}
