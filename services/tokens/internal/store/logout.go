package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Back-channel logout (OpenID Connect Back-Channel Logout 1.0): which
// apps received tokens in a browser session (session_clients), and the
// outbox of logout tokens to send them once the session ends
// (backchannel_logouts). The outbox rows are written in the transaction
// that revokes the session's or the user's tokens, so a logout that
// succeeded has its deliveries queued.

// touchEvery bounds the writes of RecordSessionClient: last_issued_at
// moves only when this much older, which is all pruning needs.
const touchEvery = time.Hour

// RecordSessionClient notes, in q (the transaction that records what the
// app receives), that clientID received tokens of userID in browser
// session sessionID at now.
func (s *Store) RecordSessionClient(ctx context.Context, q db.Querier, sessionID, clientID, userID string, now time.Time) error {
	_, err := s.q(q).Exec(ctx, `INSERT INTO session_clients (session_id, client_id, user_id, created_at, last_issued_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (session_id, client_id) DO UPDATE SET last_issued_at = excluded.last_issued_at
		WHERE session_clients.last_issued_at < ?`, sessionID, clientID, userID, now, now, now.Add(-touchEvery))
	if err != nil {
		return fmt.Errorf("record the session's client: %w", err)
	}
	return nil
}

// QueueSessionLogouts moves the apps of session sessionID into the
// outbox, due at now, and reports how many it queued. Run it in the
// transaction that revokes the session's tokens.
func (s *Store) QueueSessionLogouts(ctx context.Context, q db.Querier, sessionID string, now time.Time) (int64, error) {
	return queueLogouts(ctx, s.q(q), "the session's", `session_id = ?`, now, sessionID)
}

// QueueUserLogouts moves the apps of userID's sessions that received
// tokens first at or before notAfter (a cut-off: deactivation, removal,
// "sign out everywhere") into the outbox, due at now, and reports how
// many it queued. Run it in the transaction that revokes the user's
// tokens.
func (s *Store) QueueUserLogouts(ctx context.Context, q db.Querier, userID string, notAfter, now time.Time) (int64, error) {
	return queueLogouts(ctx, s.q(q), "the user's", `user_id = ? AND created_at <= ?`, now, userID, notAfter)
}

func queueLogouts(ctx context.Context, q db.Querier, what, where string, now time.Time, args ...any) (int64, error) {
	// WHERE before ON CONFLICT: SQLite reads an INSERT … SELECT's ON
	// otherwise as a join's. A pair already queued (a repeated cut-off)
	// stays as it is.
	res, err := q.Exec(ctx, `INSERT INTO backchannel_logouts (session_id, client_id, user_id, created_at, next_attempt_at, attempts)
		SELECT session_id, client_id, user_id, ?, ?, 0 FROM session_clients WHERE `+where+`
		ON CONFLICT (session_id, client_id) DO NOTHING`, append([]any{now, now}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("queue %s back-channel logouts: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("queue %s back-channel logouts: %w", what, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM session_clients WHERE `+where, args...); err != nil {
		return 0, fmt.Errorf("queue %s back-channel logouts: %w", what, err)
	}
	return n, nil
}

// Logout is a back-channel logout in the outbox: the logout token for
// ClientID about UserID's session SessionID.
type Logout struct {
	SessionID     string    `db:"session_id"`
	ClientID      string    `db:"client_id"`
	UserID        string    `db:"user_id"`
	CreatedAt     time.Time `db:"created_at"`
	NextAttemptAt time.Time `db:"next_attempt_at"`
	// Attempts counts the tries claimed so far (ClaimLogout's included).
	Attempts int `db:"attempts"`
}

// DueLogouts returns at most limit logouts due at now, the longest due
// first, and when the earliest of the others falls due (zero when none
// is queued): a claimed one's lease, a failed one's retry.
func (s *Store) DueLogouts(ctx context.Context, now time.Time, limit int) ([]Logout, time.Time, error) {
	var due []Logout
	if err := s.DB.Select(ctx, &due, `SELECT session_id, client_id, user_id, created_at, next_attempt_at, attempts
		FROM backchannel_logouts WHERE next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`, now, limit); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the back-channel logout outbox: %w", err)
	}
	// The column itself, not MIN(): SQLite types an aggregate's result
	// as text.
	var next time.Time
	err := s.DB.Get(ctx, &next, `SELECT next_attempt_at FROM backchannel_logouts WHERE next_attempt_at > ?
		ORDER BY next_attempt_at LIMIT 1`, now)
	if err != nil && !errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, time.Time{}, fmt.Errorf("read the back-channel logout outbox: %w", err)
	}
	return due, next, nil
}

// ClaimLogout leases l, read as due, until until and counts the try
// (l.Attempts too): a conditional UPDATE of the lease column, so of
// several senders (replicas, rounds) exactly one gets true while the
// lease lasts. Past it (the sender died), the logout is due again.
func (s *Store) ClaimLogout(ctx context.Context, l *Logout, now, until time.Time) (bool, error) {
	// The count as the claim leaves it: another sender may have tried
	// the logout between the read and the claim.
	err := s.DB.Get(ctx, &l.Attempts, `UPDATE backchannel_logouts SET next_attempt_at = ?, attempts = attempts + 1
		WHERE session_id = ? AND client_id = ? AND next_attempt_at <= ? RETURNING attempts`, until, l.SessionID, l.ClientID, now)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim a back-channel logout: %w", err)
	}
	return true, nil
}

// DeleteLogout removes l from the outbox: delivered, dropped or given up.
func (s *Store) DeleteLogout(ctx context.Context, l Logout) error {
	if _, err := s.DB.Exec(ctx, `DELETE FROM backchannel_logouts WHERE session_id = ? AND client_id = ?`, l.SessionID, l.ClientID); err != nil {
		return fmt.Errorf("delete a back-channel logout: %w", err)
	}
	return nil
}

// RetryLogout makes l, claimed with l.Attempts, due again at at. It
// reports false when another sender has claimed it since (this one's
// lease ran out), which keeps that sender's lease.
func (s *Store) RetryLogout(ctx context.Context, l Logout, at time.Time) (bool, error) {
	res, err := s.DB.Exec(ctx, `UPDATE backchannel_logouts SET next_attempt_at = ?
		WHERE session_id = ? AND client_id = ? AND attempts = ?`, at, l.SessionID, l.ClientID, l.Attempts)
	if err != nil {
		return false, fmt.Errorf("reschedule a back-channel logout: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("reschedule a back-channel logout: %w", err)
	}
	return n == 1, nil
}

// LogoutPruneSteps delete session_clients rows retention after their last
// issue (no token of the session is left: retention is at least the
// refresh token's absolute lifetime), and outbox rows abandon after they
// were queued (the sender gives up sooner; this catches rows whose
// sender kept dying).
func LogoutPruneSteps(retention, abandon time.Duration) []db.PruneStep {
	return []db.PruneStep{
		{Table: "session_clients", Args: func(now time.Time) []any { return []any{now.Add(-retention)} },
			Query: `DELETE FROM session_clients WHERE (session_id, client_id) IN (SELECT session_id, client_id FROM session_clients
				WHERE last_issued_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "backchannel_logouts", Args: func(now time.Time) []any { return []any{now.Add(-abandon)} },
			Query: `DELETE FROM backchannel_logouts WHERE (session_id, client_id) IN (SELECT session_id, client_id FROM backchannel_logouts
				WHERE created_at < ? LIMIT ` + db.Batch + `)`},
	}
}
