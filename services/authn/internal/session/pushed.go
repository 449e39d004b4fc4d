package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// PushedRequest is a pushed authorization request (RFC 9126): the client
// that pushed it and its parameters (JSON), under a request_uri.
type PushedRequest struct {
	URI       string
	ClientID  string
	Params    []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

func uriHash(uri string) []byte {
	h := sha256.Sum256([]byte(uri))
	return h[:]
}

// Push stores a pushed request.
func (s *Store) Push(ctx context.Context, p PushedRequest) error {
	// A request lost in a power failure is pushed again by its client.
	_, err := s.DB.Relaxed().Exec(ctx, `INSERT INTO pushed_requests (uri_hash, client_id, params, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		uriHash(p.URI), p.ClientID, string(p.Params), p.CreatedAt, p.ExpiresAt)
	if err != nil {
		return fmt.Errorf("store pushed request: %w", err)
	}
	return nil
}

// TakePushed returns the parameters pushed under uri by clientID and
// deletes them, in one statement: a request_uri works once, for its own
// client, until it expires. ErrNotFound otherwise (unknown, another
// client's, used or expired: the same answer).
func (s *Store) TakePushed(ctx context.Context, uri, clientID string, now time.Time) ([]byte, error) {
	var params string
	err := s.DB.Get(ctx, &params, `DELETE FROM pushed_requests WHERE uri_hash = ? AND client_id = ? AND expires_at > ? RETURNING params`,
		uriHash(uri), clientID, now)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("take pushed request: %w", err)
	}
	return []byte(params), nil
}
