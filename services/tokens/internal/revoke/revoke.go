package revoke

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
)

// Path is the public revocation endpoint.
const Path = "/oauth/v2/revoke"

// Token type hints (RFC 7009 §2.1).
const (
	HintAccessToken  = "access_token"
	HintRefreshToken = "refresh_token"
)

// ClientAuthenticator authenticates the calling client (clients.Authenticator).
type ClientAuthenticator interface {
	Authenticate(ctx context.Context, cr clients.Credentials, allowed ...clients.Method) (*clients.Authenticated, error)
}

// AccessTokens validates access tokens (accesstoken.Verifier): the
// token's data, or accesstoken.ErrInactive for an unknown, expired or
// already revoked one.
type AccessTokens interface {
	Verify(ctx context.Context, raw string) (*accesstoken.Token, error)
}

// Revocations is the revocation list (revocation.List).
type Revocations interface {
	Revoke(ctx context.Context, tokenID string, expiresAt time.Time) error
}

// RefreshRevoker revokes refresh tokens. RevokeRefreshToken revokes the
// refresh token raw and the access tokens issued from it, provided it was
// issued to clientID. found is false for anything that is not a refresh
// token of clientID (unknown, or another client's: then nothing changes);
// a refresh token already revoked or expired may report either. err is
// only for a failure to answer or to revoke.
type RefreshRevoker interface {
	RevokeRefreshToken(ctx context.Context, raw, clientID string) (found bool, err error)
}

// Exchanged revokes what was exchanged from an access token (RFC 8693),
// down every chain (lifecycle.Lifecycle).
type Exchanged interface {
	RevokeExchanged(ctx context.Context, tokenID string) error
}

// Endpoint is POST /oauth/v2/revoke.
type Endpoint struct {
	Auth    ClientAuthenticator
	Access  AccessTokens
	Revoked Revocations
	Refresh RefreshRevoker
	// Exchanged, when set, revokes the tokens exchanged from a revoked
	// access token first: once the token itself is revoked, a retry would
	// no longer find it.
	Exchanged Exchanged
	Logger    *slog.Logger
}

// New returns the revocation endpoint; every dependency is required.
func New(auth ClientAuthenticator, access AccessTokens, revoked Revocations, refresh RefreshRevoker, logger *slog.Logger) (*Endpoint, error) {
	if auth == nil || access == nil || revoked == nil || refresh == nil {
		return nil, errors.New("revoke: authenticator, access tokens, revocation list and refresh revoker are required")
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Endpoint{Auth: auth, Access: access, Revoked: revoked, Refresh: refresh, Logger: logger}, nil
}

// ServeHTTP implements the endpoint: 200 with an empty body once nothing of
// the client's that the token names is left unrevoked (RFC 7009 §2.2),
// invalid_request for a malformed request or a missing token,
// invalid_client (401 with a challenge when the Basic header was used)
// for failed client authentication, and 503 temporarily_unavailable with
// Retry-After when the revocation could not be made durable (§2.2.1).
// Every response is Cache-Control: no-store.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := e.revoke(r); err != nil {
		e.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func (e *Endpoint) revoke(r *http.Request) error {
	req, err := form.Parse(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// RFC 7009 §2.1: the client is authenticated before the token is looked at.
	client, err := e.Auth.Authenticate(ctx, req.Creds, clients.SecretBasic, clients.SecretPost, clients.None, clients.PrivateKeyJWT, clients.MachineKeyJWT)
	if err != nil {
		return err
	}
	raw := req.Get("token")
	if raw == "" {
		return oauth.New(oauth.InvalidRequest, "token is required")
	}
	clientID := client.Client.GetClientId()
	// The hint only orders the lookups; an unknown hint is ignored (§2.2.1
	// reserves unsupported_token_type for types the server cannot revoke,
	// and both types are supported).
	if req.Get("token_type_hint") == HintRefreshToken {
		if found, err := e.refresh(ctx, raw, clientID); found || err != nil {
			return err
		}
		_, err := e.access(ctx, raw, clientID)
		return err
	}
	if found, err := e.access(ctx, raw, clientID); found || err != nil {
		return err
	}
	_, err = e.refresh(ctx, raw, clientID)
	return err
}

// access revokes raw if it is a live access token; found reports that it
// is one, whichever client it belongs to. Another client's token is left
// alone (§2.1: the server verifies the token was issued to the client).
func (e *Endpoint) access(ctx context.Context, raw, clientID string) (found bool, err error) {
	t, err := e.Access.Verify(ctx, raw)
	if errors.Is(err, accesstoken.ErrInactive) {
		return false, nil
	}
	if err != nil {
		return false, oauth.New(oauth.TemporarilyUnavailable, "token lookup failed").WithCause(err)
	}
	if t.ClientID != clientID {
		return true, nil
	}
	if e.Exchanged != nil {
		if err := e.Exchanged.RevokeExchanged(ctx, t.ID); err != nil {
			return true, oauth.New(oauth.TemporarilyUnavailable, "the token could not be revoked; retry").WithCause(err)
		}
	}
	if err := e.Revoked.Revoke(ctx, t.ID, t.ExpiresAt); err != nil {
		return true, oauth.New(oauth.TemporarilyUnavailable, "the token could not be revoked; retry").WithCause(err)
	}
	return true, nil
}

func (e *Endpoint) refresh(ctx context.Context, raw, clientID string) (bool, error) {
	found, err := e.Refresh.RevokeRefreshToken(ctx, raw, clientID)
	if err != nil {
		return false, oauth.New(oauth.TemporarilyUnavailable, "the token could not be revoked; retry").WithCause(err)
	}
	return found, nil
}

// writeError renders every error of this endpoint (RFC 6749 §5.2 JSON,
// RFC 7009 §2.2.1).
func (e *Endpoint) writeError(w http.ResponseWriter, r *http.Request, err error) {
	oauth.Write(w, r, e.Logger, "revocation", err)
}
