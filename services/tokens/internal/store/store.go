// Package store keeps the tokens service's records: assertion jti values
// (replay protection), access tokens that must be looked up (opaque ones,
// and JWTs tied to a session or refresh token), refresh tokens and
// authorization codes. Secrets are stored only as keyed hashes.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
)

// Store is the tokens service's record store.
type Store struct {
	DB *db.DB

	group group // standalone access-token inserts, committed together
}

var _ assertion.ReplayStore = (*Store)(nil)

// Use records an assertion's jti until exp; a second use is
// assertion.ErrReplayed.
func (s *Store) Use(ctx context.Context, issuer, jti string, exp time.Time) error {
	return use(ctx, s.DB, issuer, jti, exp)
}

// dpopIssuer prefixes a DPoP key's proofs in assertion_jtis: a jkt never
// collides with a client id.
const dpopIssuer = "dpop:"

// UseProof records a DPoP proof's jti under its key until it can no
// longer be accepted (dpop.ReplayStore). The embedded server's store: the
// write is relaxed (one per proof, on the token and resource hot paths);
// a start after a crash refuses proofs issued before it instead
// (dpop.Verifier.NotAfter).
func (s *Store) UseProof(ctx context.Context, jkt, jti string, until time.Time) error {
	issuer := dpopIssuer + jkt
	// Committed with the access tokens being recorded at the same time
	// (group): a token request with a proof writes both. A replay fails
	// the group, whose records are then written one by one (use).
	err := s.group.add(ctx, s.DB.Relaxed(), func(ctx context.Context, q db.Querier) error {
		_, err := q.Exec(ctx, insertJTISQL, issuer, jti, until)
		return err
	}, func(ctx context.Context, d *db.DB) error { return use(ctx, d, issuer, jti, until) })
	if errors.Is(err, assertion.ErrReplayed) {
		return dpop.ErrReplayed
	}
	return err
}

const insertJTISQL = `INSERT INTO assertion_jtis (issuer, jti, expires_at) VALUES (?, ?, ?)`

func use(ctx context.Context, d *db.DB, issuer, jti string, exp time.Time) error {
	_, err := d.Exec(ctx, insertJTISQL, issuer, jti, exp)
	if db.IsUniqueViolation(err) {
		// An expired entry may linger until pruned; it no longer blocks.
		var expires time.Time
		if gerr := d.Get(ctx, &expires, `SELECT expires_at FROM assertion_jtis WHERE issuer = ? AND jti = ?`, issuer, jti); gerr == nil && time.Now().After(expires) {
			res, uerr := d.Exec(ctx, `UPDATE assertion_jtis SET expires_at = ? WHERE issuer = ? AND jti = ? AND expires_at = ?`, exp, issuer, jti, expires)
			if uerr != nil {
				return fmt.Errorf("record jti: %w", uerr)
			}
			// Of parallel uses taking over the expired entry, the one
			// whose update matched wins; the others are replays.
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return assertion.ErrReplayed
			}
			return nil
		}
		return assertion.ErrReplayed
	}
	if err != nil {
		return fmt.Errorf("record jti: %w", err)
	}
	return nil
}

// AccessToken is a recorded access token.
type AccessToken struct {
	ID        string     `db:"id"`
	TokenHash []byte     `db:"token_hash"`
	ClientID  string     `db:"client_id"`
	Subject   string     `db:"subject"`
	OrgID     string     `db:"org_id"`
	ScopesRaw string     `db:"scopes"`
	AudRaw    string     `db:"audience"`
	SessionID *string    `db:"session_id"`
	RefreshID *string    `db:"refresh_id"`
	AuthTime  *time.Time `db:"auth_time"`
	AMRRaw    string     `db:"amr"`
	CreatedAt time.Time  `db:"created_at"`
	ExpiresAt time.Time  `db:"expires_at"`
	// JKT is the thumbprint of the DPoP key the token is bound to (RFC
	// 9449); nil for a bearer token.
	JKT *string `db:"jkt"`
	// Act is the act claim (JSON) of an exchanged token that acts for its
	// subject (RFC 8693 §4.1); ParentID the access token it was exchanged
	// from. Both nil otherwise.
	Act      *string `db:"act"`
	ParentID *string `db:"parent_id"`
	// Impersonator is the machine user whose impersonation issued it;
	// Depth the exchanges down from a token not exchanged.
	Impersonator *string `db:"impersonator"`
	Depth        int     `db:"exchange_depth"`
}

// Scopes returns the granted scopes.
func (a *AccessToken) Scopes() []string { return strings.Fields(a.ScopesRaw) }

// AMR returns the login's authentication methods (none for tokens without
// a person's login).
func (a *AccessToken) AMR() []string { return decodeList(a.AMRRaw) }

// Audience returns the audience.
func (a *AccessToken) Audience() []string {
	var out []string
	_ = json.Unmarshal([]byte(a.AudRaw), &out)
	return out
}

// NewAccessToken fills the encoded fields of a record.
func NewAccessToken(id string, hash []byte, clientID, subject, orgID string, scopes, aud, amr []string, created, expires time.Time) *AccessToken {
	a, _ := json.Marshal(aud)
	m, _ := json.Marshal(amr)
	return &AccessToken{ID: id, TokenHash: hash, ClientID: clientID, Subject: subject, OrgID: orgID,
		ScopesRaw: strings.Join(scopes, " "), AudRaw: string(a), AMRRaw: string(m), CreatedAt: created, ExpiresAt: expires}
}

// InsertAccessToken records a token in q, or, when q is nil, on its own:
// it returns once the record is committed. A standalone record is an
// opaque token's, which is nothing without it: it is committed through
// db.DB.Relaxed, since a record lost in a power failure only makes its
// token inactive (the client asks for another). Concurrent standalone
// inserts share one transaction (see group): distributed, on PostgreSQL,
// that halves PostgreSQL's CPU per opaque token (bench/README, "Hand-made
// machinery").
func (s *Store) InsertAccessToken(ctx context.Context, q db.Querier, a *AccessToken) error {
	if q == nil {
		return s.group.insert(ctx, s.DB.Relaxed(), a)
	}
	return insertAccessToken(ctx, q, a)
}

const insertAccessTokenSQL = `INSERT INTO access_tokens (id, token_hash, client_id, subject, org_id, scopes, audience,
		session_id, refresh_id, auth_time, amr, created_at, expires_at, jkt, act, parent_id, impersonator, exchange_depth)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func insertAccessToken(ctx context.Context, q db.Querier, a *AccessToken) error {
	var hash any
	if len(a.TokenHash) > 0 {
		hash = a.TokenHash
	}
	_, err := q.Exec(ctx, insertAccessTokenSQL,
		a.ID, hash, a.ClientID, a.Subject, a.OrgID, a.ScopesRaw, a.AudRaw, a.SessionID, a.RefreshID, a.AuthTime, a.AMRRaw,
		a.CreatedAt, a.ExpiresAt, a.JKT, a.Act, a.ParentID, a.Impersonator, a.Depth)
	if err != nil {
		return fmt.Errorf("record access token: %w", err)
	}
	return nil
}

// ErrNotFound is returned for an unknown token.
var ErrNotFound = errors.New("token not found")

const accessColumns = `id, token_hash, client_id, subject, org_id, scopes, audience, session_id, refresh_id, auth_time, amr, created_at, expires_at, jkt,
	act, parent_id, impersonator, exchange_depth`

// AccessTokenByHash finds an opaque access token.
func (s *Store) AccessTokenByHash(ctx context.Context, hash []byte) (*AccessToken, error) {
	var a AccessToken
	err := s.DB.Get(ctx, &a, `SELECT `+accessColumns+` FROM access_tokens WHERE token_hash = ?`, hash)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find access token: %w", err)
	}
	return &a, nil
}

// AccessTokenByID finds a recorded access token (a JWT's record, by its
// jti): ErrNotFound when it is not recorded.
func (s *Store) AccessTokenByID(ctx context.Context, id string) (*AccessToken, error) {
	var a AccessToken
	err := s.DB.Get(ctx, &a, `SELECT `+accessColumns+` FROM access_tokens WHERE id = ?`, id)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find access token: %w", err)
	}
	return &a, nil
}

// MaxExchangeDepth bounds chains of exchanges: a token this deep is not
// exchanged again, so ExchangedFrom reaches the end of every chain.
const MaxExchangeDepth = 20

// ExchangedFrom returns the unexpired access tokens exchanged from the
// given ones, directly or down a chain of exchanges (RFC 8693): revoking
// a token revokes them too.
func (s *Store) ExchangedFrom(ctx context.Context, q db.Querier, ids []string, now time.Time) ([]Live, error) {
	var out []Live
	seen := map[string]bool{}
	for depth := 0; len(ids) > 0 && depth <= MaxExchangeDepth; depth++ {
		var next []string
		for _, id := range ids {
			got, err := selectLive(ctx, s.q(q), `SELECT id, expires_at FROM access_tokens WHERE parent_id = ? AND expires_at > ? ORDER BY id`, id, now)
			if err != nil {
				return nil, err
			}
			for _, l := range got {
				if !seen[l.ID] {
					seen[l.ID] = true
					out = append(out, l)
					next = append(next, l.ID)
				}
			}
		}
		ids = next
	}
	return out, nil
}

// Impersonations returns the unexpired access tokens impersonations
// issued for users of org up to notAfter, or, with org "", by the machine
// user impersonator up to notAfter.
func (s *Store) Impersonations(ctx context.Context, q db.Querier, org, impersonator string, notAfter, now time.Time) ([]Live, error) {
	if org != "" {
		return selectLive(ctx, s.q(q), `SELECT id, expires_at FROM access_tokens
			WHERE impersonator IS NOT NULL AND org_id = ? AND created_at <= ? AND expires_at > ? ORDER BY id`, org, notAfter, now)
	}
	return selectLive(ctx, s.q(q), `SELECT id, expires_at FROM access_tokens
		WHERE impersonator = ? AND created_at <= ? AND expires_at > ? ORDER BY id`, impersonator, notAfter, now)
}

// EndSession records that a browser session ended (logout) until its ID
// tokens have expired, so that none of them is exchanged for new tokens.
func (s *Store) EndSession(ctx context.Context, q db.Querier, sessionID string, until time.Time) error {
	_, err := s.q(q).Exec(ctx, `INSERT INTO ended_sessions (session_id, expires_at) VALUES (?, ?)
		ON CONFLICT (session_id) DO UPDATE SET expires_at = excluded.expires_at`, sessionID, until)
	if err != nil {
		return fmt.Errorf("record ended session: %w", err)
	}
	return nil
}

// SessionEnded reports whether a browser session ended by logout.
func (s *Store) SessionEnded(ctx context.Context, sessionID string) (bool, error) {
	var n int
	if err := s.DB.Get(ctx, &n, `SELECT COUNT(*) FROM ended_sessions WHERE session_id = ?`, sessionID); err != nil {
		return false, fmt.Errorf("find ended session: %w", err)
	}
	return n > 0, nil
}

// PruneSteps delete what no longer matters: access tokens and used
// assertion ids past their expiry, refresh tokens past their idle or
// family expiry, and authorization codes and device authorizations
// codeGrace after their expiry (a late replay of a code must still revoke
// what its first use issued).
func PruneSteps(codeGrace time.Duration) []db.PruneStep {
	at := func(now time.Time) []any { return []any{now} }
	return []db.PruneStep{
		{Table: "access_tokens", Args: at,
			Query: `DELETE FROM access_tokens WHERE id IN (SELECT id FROM access_tokens WHERE expires_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "ended_sessions", Args: at,
			Query: `DELETE FROM ended_sessions WHERE session_id IN (SELECT session_id FROM ended_sessions WHERE expires_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "assertion_jtis", Args: at,
			Query: `DELETE FROM assertion_jtis WHERE (issuer, jti) IN (SELECT issuer, jti FROM assertion_jtis WHERE expires_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "refresh_tokens", Args: at,
			Query: `DELETE FROM refresh_tokens WHERE id IN (SELECT id FROM refresh_tokens WHERE expires_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "refresh_tokens", Args: at,
			Query: `DELETE FROM refresh_tokens WHERE id IN (SELECT id FROM refresh_tokens WHERE family_expires_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "auth_codes", Args: func(now time.Time) []any { return []any{now.Add(-codeGrace)} },
			Query: `DELETE FROM auth_codes WHERE id IN (SELECT id FROM auth_codes WHERE expires_at < ? LIMIT ` + db.Batch + `)`},
		{Table: "device_codes", Args: func(now time.Time) []any { return []any{now.Add(-codeGrace)} },
			Query: `DELETE FROM device_codes WHERE id IN (SELECT id FROM device_codes WHERE expires_at < ? LIMIT ` + db.Batch + `)`},
	}
}

// SaveProofSnapshot keeps the embedded server's remembered DPoP proofs
// (dpop.MemoryReplay.Entries) until its next start, durably, replacing an
// earlier snapshot.
func (s *Store) SaveProofSnapshot(ctx context.Context, entries []dpop.Entry) error {
	return s.DB.InTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM dpop_replay_snapshot`); err != nil {
			return err
		}
		for _, e := range entries {
			if _, err := tx.Exec(ctx, `INSERT INTO dpop_replay_snapshot (proof_key, expires_at) VALUES (?, ?)`, e.Key[:], e.Until); err != nil {
				return fmt.Errorf("save DPoP proofs: %w", err)
			}
		}
		return nil
	})
}

// TakeProofSnapshot returns the snapshot's unexpired entries and deletes it.
func (s *Store) TakeProofSnapshot(ctx context.Context, now time.Time) ([]dpop.Entry, error) {
	var rows []struct {
		Key       []byte    `db:"proof_key"`
		ExpiresAt time.Time `db:"expires_at"`
	}
	if err := s.DB.Select(ctx, &rows, `SELECT proof_key, expires_at FROM dpop_replay_snapshot WHERE expires_at >= ?`, now); err != nil {
		return nil, fmt.Errorf("load DPoP proofs: %w", err)
	}
	if _, err := s.DB.Exec(ctx, `DELETE FROM dpop_replay_snapshot`); err != nil {
		return nil, fmt.Errorf("load DPoP proofs: %w", err)
	}
	out := make([]dpop.Entry, 0, len(rows))
	for _, r := range rows {
		if len(r.Key) == 32 {
			out = append(out, dpop.Entry{Key: [32]byte(r.Key), Until: r.ExpiresAt})
		}
	}
	return out, nil
}
