package session

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// ErrNotFound is returned (wrapped) for a missing, expired or foreign row.
var ErrNotFound = db.ErrNotFound

// UserAgent is one browser.
type UserAgent struct {
	ID        string `db:"id"`
	CSRFToken string `db:"csrf_token"`
}

// Session is one user signed in on one browser.
type Session struct {
	ID          string
	UserAgentID string
	UserID      string
	OrgID       string
	LoginName   string
	DisplayName string
	AuthTime    time.Time
	AMR         []string
	// LastActive is the session's last activity: its sign-in, or the last
	// authorization request it answered (see Lifetimes).
	LastActive time.Time
	// Checks are when each kind of check last passed (the login policy's
	// check lifetimes). A sign-in records the checks it ran; the others
	// keep the session's earlier times.
	Checks Checks
}

// Checks are the times of a session's last checks by kind; zero for a
// kind that never passed (or a session from before they were recorded:
// its AuthTime stands in, see Checked).
type Checks struct {
	Password     time.Time `json:"pwd,omitzero"`
	SecondFactor time.Time `json:"2fa,omitzero"`
	// MultiFactor: a passkey (both factors at once).
	MultiFactor time.Time `json:"mfa,omitzero"`
	External    time.Time `json:"fed,omitzero"`
}

// merge is c with the kinds newer set.
func (c Checks) merge(newer Checks) Checks {
	for _, p := range []struct{ dst, src *time.Time }{{&c.Password, &newer.Password}, {&c.SecondFactor, &newer.SecondFactor},
		{&c.MultiFactor, &newer.MultiFactor}, {&c.External, &newer.External}} {
		if !p.src.IsZero() {
			*p.dst = p.src.UTC().Truncate(time.Second)
		}
	}
	return c
}

// Checked is when the check t recorded last passed: t, or the session's
// authentication for a session from before checks were recorded.
func (s Session) Checked(t time.Time) time.Time {
	if t.IsZero() {
		return s.AuthTime
	}
	return t
}

type sessionRow struct {
	ID          string    `db:"id"`
	UserAgentID string    `db:"user_agent_id"`
	UserID      string    `db:"user_id"`
	OrgID       string    `db:"org_id"`
	LoginName   string    `db:"login_name"`
	DisplayName string    `db:"display_name"`
	AuthTime    time.Time `db:"auth_time"`
	AMR         string    `db:"amr"`
	Checks      string    `db:"checks"`
	LastActive  time.Time `db:"last_active_at"`
	// Open: not ended; Live: open and within its lifetimes (Lifetimes.live).
	Open bool `db:"is_open"`
	Live bool `db:"is_live"`
}

func (r sessionRow) session() (Session, error) {
	s := Session{ID: r.ID, UserAgentID: r.UserAgentID, UserID: r.UserID, OrgID: r.OrgID,
		LoginName: r.LoginName, DisplayName: r.DisplayName, AuthTime: r.AuthTime, LastActive: r.LastActive}
	if err := json.Unmarshal([]byte(r.AMR), &s.AMR); err != nil {
		return Session{}, fmt.Errorf("session %s: amr: %w", r.ID, err)
	}
	if r.Checks != "" {
		if err := json.Unmarshal([]byte(r.Checks), &s.Checks); err != nil {
			return Session{}, fmt.Errorf("session %s: checks: %w", r.ID, err)
		}
	}
	return s, nil
}

// Lifetimes bound a session: it is live, and answers authorization
// requests without a login, while now < LastActive + Idle and now <
// AuthTime + Absolute, and nothing ended it. Lifetimes.live is the one
// place that applies them; every read of sessions goes through it.
// A zero field takes DefaultLifetimes' value.
type Lifetimes struct {
	Idle     time.Duration
	Absolute time.Duration
	// Retention: how long an ended or expired session, and a browser with
	// no session and nothing pending, is kept (default 24h).
	Retention time.Duration
}

// DefaultLifetimes are the defaults of GATEHOUSE_SESSION_IDLE_LIFETIME and
// GATEHOUSE_SESSION_ABSOLUTE_LIFETIME (pkg/config says why).
var DefaultLifetimes = Lifetimes{Idle: 2 * time.Hour, Absolute: 10 * time.Hour}

func (l Lifetimes) orDefault() Lifetimes {
	if l.Idle <= 0 {
		l.Idle = DefaultLifetimes.Idle
	}
	if l.Absolute <= 0 {
		l.Absolute = DefaultLifetimes.Absolute
	}
	if l.Retention <= 0 {
		l.Retention = EndedSessionRetention
	}
	return l
}

// live returns the SQL condition that a sessions row is live at now, and
// its arguments.
func (l Lifetimes) live(now time.Time) (string, []any) {
	l = l.orDefault()
	return `(ended_at IS NULL AND last_active_at > ? AND auth_time > ?)`, []any{now.Add(-l.Idle), now.Add(-l.Absolute)}
}

// AuthRequest is a validated authorization request waiting for a login.
// Params is the request as its owner (package authorize) serialized it.
type AuthRequest struct {
	ID          string `db:"id"`
	UserAgentID string `db:"user_agent_id"`
	Params      []byte `db:"params"`
	LoginName   string `db:"login_name"`
	UserID      string `db:"user_id"`
	// External is an identity an external provider asserted that no user
	// is linked to yet (JSON), while the user links or registers it.
	External string `db:"external"`
	// FirstFactor is the authentication passed so far while a second
	// factor is owed (JSON, package login's).
	FirstFactor string    `db:"first_factor"`
	CreatedAt   time.Time `db:"created_at"`
	ExpiresAt   time.Time `db:"expires_at"`
}

// Store is authn's storage.
type Store struct {
	DB        *db.DB
	Lifetimes Lifetimes
}

// UserAgentID is the row id of a cookie value: its SHA-256, so a leaked
// table does not hand out working cookies.
func UserAgentID(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

// A browser is known by its cookie alone until someone signs in on it:
// an anonymous visit (GET /authorize, the login pages) stores nothing about
// the browser, so anonymous traffic cannot grow user_agents. Its row is
// made with its first session (SignIn, Upsert), and the pruner
// removes it once it holds none.

// NewUserAgent makes a new browser identity: a cookie value and the
// identity it names. Nothing is stored.
func NewUserAgent() (cookie string, ua UserAgent) {
	cookie = secrets.RandomToken(cookieBytes)
	return cookie, identify(cookie)
}

// ParseUserAgent returns the browser a cookie value names; a value
// Gatehouse cannot have issued is ErrNotFound.
func ParseUserAgent(cookie string) (UserAgent, error) {
	if len(cookie) != base64.RawURLEncoding.EncodedLen(cookieBytes) {
		return UserAgent{}, fmt.Errorf("user agent cookie: %w", ErrNotFound)
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(cookie); err != nil {
		return UserAgent{}, fmt.Errorf("user agent cookie: %w", ErrNotFound)
	}
	return identify(cookie), nil
}

// cookieBytes is the entropy of a cookie value.
const cookieBytes = 32

// identify derives a browser's identity from its cookie value: the row id
// (UserAgentID) and the CSRF token of its forms, a MAC keyed by the cookie,
// so it cannot be made without the cookie and reveals nothing of it.
func identify(cookie string) UserAgent {
	m := hmac.New(sha256.New, []byte(cookie))
	m.Write([]byte("gatehouse form csrf token"))
	return UserAgent{ID: UserAgentID(cookie), CSRFToken: base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
}

// rotate gives the browser oldID a new identity newID at every successful
// authentication (see SignIn): its sessions and pending requests move to
// it and the old cookie names nothing, so a cookie planted before the
// sign-in (session fixation) is worthless after it.
func rotate(ctx context.Context, tx *db.Tx, oldID, newID string, now time.Time) error {
	if _, err := tx.Exec(ctx, `INSERT INTO user_agents (id, created_at, last_seen_at) VALUES (?, ?, ?)`, newID, now, now); err != nil {
		return err
	}
	for _, table := range []string{"sessions", "auth_requests", "idp_flows"} {
		if _, err := tx.Exec(ctx, `UPDATE `+table+` SET user_agent_id = ? WHERE user_agent_id = ?`, newID, oldID); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `DELETE FROM user_agents WHERE id = ?`, oldID)
	return err
}

// SignIn records a successful authentication of in.UserID on the browser
// oldID for the pending request authRequestID, in one transaction: the
// browser gets a new identity (rotate), the user's session on it
// is created or renewed at now (Upsert, with in.UserAgentID ignored), and
// the request is consumed (ConsumeAuthRequest). A request already consumed
// is ErrNotFound and changes nothing. It returns the new cookie and
// identity and the stored session. One transaction instead of three
// writes: a sign-in is the login's costliest step after the password hash.
func (s *Store) SignIn(ctx context.Context, oldID string, in Session, authRequestID string, now time.Time) (cookie string, ua UserAgent, out Session, err error) {
	amr, err := json.Marshal(in.AMR)
	if err != nil {
		return "", UserAgent{}, Session{}, fmt.Errorf("session amr: %w", err)
	}
	signIn := func(tx *db.Tx) error {
		cookie, ua = NewUserAgent()
		if err := rotate(ctx, tx, oldID, ua.ID, now); err != nil {
			return err
		}
		in.UserAgentID = ua.ID
		if out, err = s.upsert(ctx, tx, in, string(amr), now); err != nil {
			return err
		}
		return consume(ctx, tx, authRequestID)
	}
	// Pending login state and sign-ins are db.DB.Relaxed's: lost in a
	// power failure, they make the user sign in again.
	err = s.DB.Relaxed().InTx(ctx, signIn)
	if errors.Is(err, db.ErrConflict) {
		err = s.DB.Relaxed().InTx(ctx, signIn) // see Upsert
	}
	if err != nil {
		return "", UserAgent{}, Session{}, fmt.Errorf("sign in: %w", err)
	}
	return cookie, ua, out, nil
}

const sessionColumns = `id, user_agent_id, user_id, org_id, login_name, display_name, auth_time, amr, checks`

// Sessions returns a browser's sessions at now, most recent login first:
// the live ones (see Lifetimes), and the expired ones (past a lifetime,
// or ended and not yet pruned). An expired session is no session: nothing
// may be answered with it, and its login name may only pre-fill the login
// page. Sessions past a lifetime are marked ended here, so the pruner
// removes them after EndedSessionRetention.
func (s *Store) Sessions(ctx context.Context, userAgentID string, now time.Time) (live, expired []Session, err error) {
	cond, args := s.Lifetimes.live(now)
	var rows []sessionRow
	err = s.DB.Select(ctx, &rows, `SELECT `+sessionColumns+`, last_active_at, ended_at IS NULL AS is_open, `+cond+` AS is_live
		FROM sessions WHERE user_agent_id = ? ORDER BY auth_time DESC, id`, append(args, userAgentID)...)
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions: %w", err)
	}
	lapsed := false
	for _, r := range rows {
		ss, err := r.session()
		if err != nil {
			return nil, nil, err
		}
		if r.Live {
			live = append(live, ss)
			continue
		}
		expired = append(expired, ss)
		lapsed = lapsed || r.Open
	}
	if lapsed {
		// The condition is checked again: a session that a concurrent
		// sign-in renewed since the read stays open.
		cond, args := s.Lifetimes.live(now)
		if _, err := s.DB.Exec(ctx, `UPDATE sessions SET ended_at = ? WHERE user_agent_id = ? AND ended_at IS NULL AND NOT `+cond,
			append([]any{now, userAgentID}, args...)...); err != nil {
			return nil, nil, fmt.Errorf("end expired sessions: %w", err)
		}
	}
	return live, expired, nil
}

// UserSessions returns the user's live sessions in every browser at now,
// most recent login first (the account page lists them).
func (s *Store) UserSessions(ctx context.Context, userID string, now time.Time) ([]Session, error) {
	cond, args := s.Lifetimes.live(now)
	var rows []sessionRow
	err := s.DB.Select(ctx, &rows, `SELECT `+sessionColumns+`, last_active_at, ended_at IS NULL AS is_open, `+cond+` AS is_live
		FROM sessions WHERE user_id = ? AND ended_at IS NULL ORDER BY auth_time DESC, id LIMIT 100`, append(args, userID)...)
	if err != nil {
		return nil, fmt.Errorf("list the user's sessions: %w", err)
	}
	var out []Session
	for _, r := range rows {
		if !r.Live {
			continue
		}
		ss, err := r.session()
		if err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	return out, nil
}

// Touch records that session id answered an authorization request at now:
// its activity, which restarts its idle lifetime. A session that is not
// live at now is ErrNotFound and unchanged; the request must then not be
// answered with it.
func (s *Store) Touch(ctx context.Context, id string, now time.Time) error {
	cond, args := s.Lifetimes.live(now)
	res, err := s.DB.Exec(ctx, `UPDATE sessions SET last_active_at = ? WHERE id = ? AND `+cond, append([]any{now, id}, args...)...)
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("touch session %s: %w", id, ErrNotFound)
	}
	return nil
}

// Upsert records a successful authentication of s.UserID on s.UserAgentID
// at now, which is also the session's activity: the existing live session
// of that user gets a fresh auth_time and amr (so its id, and the tokens
// bound to it, stay the same); an expired or ended one is replaced by a new
// session (new id) in its row; without one a session is created. It
// returns the stored session.
func (s *Store) Upsert(ctx context.Context, in Session, now time.Time) (Session, error) {
	amr, err := json.Marshal(in.AMR)
	if err != nil {
		return Session{}, fmt.Errorf("session amr: %w", err)
	}
	var out Session
	upsert := func(tx *db.Tx) error {
		// The browser is recorded with its first session.
		if _, err := tx.Exec(ctx, `INSERT INTO user_agents (id, created_at, last_seen_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			in.UserAgentID, now, now); err != nil {
			return err
		}
		out, err = s.upsert(ctx, tx, in, string(amr), now)
		return err
	}
	err = s.DB.InTx(ctx, upsert)
	if errors.Is(err, db.ErrConflict) {
		// A concurrent login of the same user on this browser inserted
		// first; the retry updates that row.
		err = s.DB.InTx(ctx, upsert)
	}
	if err != nil {
		return Session{}, fmt.Errorf("upsert session: %w", err)
	}
	return out, nil
}

// upsert is Upsert's work in tx, on a browser already recorded; amr is
// in.AMR as JSON. A concurrent insert of the same session is db.ErrConflict.
func (s *Store) upsert(ctx context.Context, tx *db.Tx, in Session, amr string, now time.Time) (Session, error) {
	out := in
	cond, args := s.Lifetimes.live(now)
	var cur struct {
		ID     string `db:"id"`
		Live   bool   `db:"is_live"`
		Checks string `db:"checks"`
	}
	err := tx.Get(ctx, &cur, `SELECT id, checks, `+cond+` AS is_live FROM sessions WHERE user_agent_id = ? AND user_id = ?`,
		append(args, in.UserAgentID, in.UserID)...)
	if err == nil && cur.Live && cur.Checks != "" {
		// A live session keeps the times of the checks this sign-in did
		// not run (a step-up runs only the second factor).
		var old Checks
		if json.Unmarshal([]byte(cur.Checks), &old) == nil {
			out.Checks = old.merge(in.Checks)
		}
	} else {
		out.Checks = Checks{}.merge(in.Checks)
	}
	checks, jerr := json.Marshal(out.Checks)
	if jerr != nil {
		return Session{}, jerr
	}
	switch {
	case err == nil && cur.Live:
		out.ID = cur.ID
		_, err = tx.Exec(ctx, `UPDATE sessions SET org_id = ?, login_name = ?, display_name = ?, auth_time = ?, amr = ?, checks = ?, last_active_at = ?
			WHERE id = ?`, in.OrgID, in.LoginName, in.DisplayName, in.AuthTime, amr, string(checks), now, cur.ID)
	case err == nil:
		out.ID = secrets.NewID()
		_, err = tx.Exec(ctx, `UPDATE sessions SET id = ?, org_id = ?, login_name = ?, display_name = ?, auth_time = ?, amr = ?, checks = ?,
			last_active_at = ?, created_at = ?, ended_at = NULL WHERE id = ?`,
			out.ID, in.OrgID, in.LoginName, in.DisplayName, in.AuthTime, amr, string(checks), now, now, cur.ID)
	case errors.Is(db.NotFound(err), db.ErrNotFound):
		out.ID = secrets.NewID()
		_, err = tx.Exec(ctx, `INSERT INTO sessions (`+sessionColumns+`, last_active_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			out.ID, in.UserAgentID, in.UserID, in.OrgID, in.LoginName, in.DisplayName, in.AuthTime, amr, string(checks), now, now)
		err = db.Conflict(err)
	}
	if err != nil {
		return Session{}, err
	}
	out.AuthTime = in.AuthTime.UTC().Truncate(time.Microsecond)
	out.LastActive = now.UTC().Truncate(time.Microsecond)
	return out, nil
}

// Delete removes sessions by id (logout); unknown ids are ignored.
func (s *Store) Delete(ctx context.Context, ids ...string) error {
	for _, id := range ids {
		if _, err := s.DB.Exec(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
	}
	return nil
}

// CreateAuthRequest stores a pending authorization request.
func (s *Store) CreateAuthRequest(ctx context.Context, r AuthRequest) error {
	_, err := s.DB.Relaxed().Exec(ctx, `INSERT INTO auth_requests (id, user_agent_id, params, login_name, user_id, first_factor, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.ID, r.UserAgentID, string(r.Params), r.LoginName, r.UserID, r.FirstFactor, r.CreatedAt, r.ExpiresAt)
	if err != nil {
		return fmt.Errorf("create auth request: %w", db.Conflict(err))
	}
	return nil
}

// AuthRequest returns a pending request of the browser; an expired one, or
// one started in another browser, is ErrNotFound.
func (s *Store) AuthRequest(ctx context.Context, id, userAgentID string, now time.Time) (AuthRequest, error) {
	var r struct {
		AuthRequest
		Params string `db:"params"`
	}
	err := s.DB.Get(ctx, &r, `SELECT id, user_agent_id, params, login_name, user_id, external, first_factor, created_at, expires_at
		FROM auth_requests WHERE id = ? AND user_agent_id = ? AND expires_at > ?`, id, userAgentID, now)
	if err != nil {
		return AuthRequest{}, fmt.Errorf("auth request: %w", db.NotFound(err))
	}
	r.AuthRequest.Params = []byte(r.Params)
	return r.AuthRequest, nil
}

// SetAuthRequestUser records who is signing in for a pending request: the
// login name typed, and the user id once a password proved it.
func (s *Store) SetAuthRequestUser(ctx context.Context, id, loginName, userID string) error {
	res, err := s.DB.Relaxed().Exec(ctx, `UPDATE auth_requests SET login_name = ?, user_id = ? WHERE id = ?`, loginName, userID, id)
	if err != nil {
		return fmt.Errorf("update auth request: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("update auth request: %w", ErrNotFound)
	}
	return nil
}

// SetAuthRequestExternal parks an external identity (JSON) with a pending
// request.
func (s *Store) SetAuthRequestExternal(ctx context.Context, id, external string) error {
	res, err := s.DB.Relaxed().Exec(ctx, `UPDATE auth_requests SET external = ? WHERE id = ?`, external, id)
	if err != nil {
		return fmt.Errorf("update auth request: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("update auth request: %w", ErrNotFound)
	}
	return nil
}

// SetAuthRequestFirstFactor records the authentication a pending request's
// user passed so far (JSON) while a second factor is owed.
func (s *Store) SetAuthRequestFirstFactor(ctx context.Context, id, firstFactor string) error {
	res, err := s.DB.Relaxed().Exec(ctx, `UPDATE auth_requests SET first_factor = ? WHERE id = ?`, firstFactor, id)
	if err != nil {
		return fmt.Errorf("update auth request: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("update auth request: %w", ErrNotFound)
	}
	return nil
}

// SetAuthRequestUserFactor records who signs in for a pending request and
// the first factor the user passed (SetAuthRequestUser and
// SetAuthRequestFirstFactor in one write).
func (s *Store) SetAuthRequestUserFactor(ctx context.Context, id, loginName, userID, firstFactor string) error {
	res, err := s.DB.Relaxed().Exec(ctx, `UPDATE auth_requests SET login_name = ?, user_id = ?, first_factor = ? WHERE id = ?`,
		loginName, userID, firstFactor, id)
	if err != nil {
		return fmt.Errorf("update auth request: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("update auth request: %w", ErrNotFound)
	}
	return nil
}

// ConsumeAuthRequest deletes a pending request; exactly one caller gets
// nil, the others ErrNotFound, so a request completes once.
func (s *Store) ConsumeAuthRequest(ctx context.Context, id string) error {
	if err := consume(ctx, s.DB, id); err != nil {
		return fmt.Errorf("consume auth request: %w", err)
	}
	return nil
}

func consume(ctx context.Context, q db.Querier, id string) error {
	res, err := q.Exec(ctx, `DELETE FROM auth_requests WHERE id = ?`, id)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("auth request %s: %w", id, ErrNotFound)
	}
	return nil
}

// Retention of what Prune deletes.
const (
	// EndedSessionRetention is how long an ended session row, and the row
	// of a browser whose sessions are all gone, is kept.
	EndedSessionRetention = 24 * time.Hour
)

// PruneSteps delete expired pending requests and identity-provider flows,
// sessions ended over EndedSessionRetention ago or whose absolute lifetime
// (of l) passed that long ago (a browser that never came back leaves them
// unended; an idle one reaches its absolute lifetime too), and browsers
// recorded over that long ago that hold no session and nothing pending.
func PruneSteps(l Lifetimes) []db.PruneStep {
	l = l.orDefault()
	at := func(now time.Time) []any { return []any{now} }
	return []db.PruneStep{
		{Table: "auth_requests", Args: at,
			Query: `DELETE FROM auth_requests WHERE id IN (SELECT id FROM auth_requests WHERE expires_at <= ? LIMIT ` + db.Batch + `)`},
		{Table: "idp_flows", Args: at,
			Query: `DELETE FROM idp_flows WHERE state_hash IN (SELECT state_hash FROM idp_flows WHERE expires_at <= ? LIMIT ` + db.Batch + `)`},
		{Table: "sessions", Args: func(now time.Time) []any { return []any{now.Add(-l.Retention)} },
			Query: `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE ended_at IS NOT NULL AND ended_at <= ? LIMIT ` + db.Batch + `)`},
		{Table: "sessions", Args: func(now time.Time) []any { return []any{now.Add(-l.Retention - l.Absolute)} },
			Query: `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE ended_at IS NULL AND auth_time <= ? LIMIT ` + db.Batch + `)`},
		{Table: "user_agents", Args: func(now time.Time) []any { return []any{now.Add(-l.Retention)} },
			Query: `DELETE FROM user_agents WHERE id IN (SELECT ua.id FROM user_agents ua WHERE ua.created_at <= ?
			AND NOT EXISTS (SELECT 1 FROM sessions se WHERE se.user_agent_id = ua.id)
			AND NOT EXISTS (SELECT 1 FROM auth_requests ar WHERE ar.user_agent_id = ua.id)
			AND NOT EXISTS (SELECT 1 FROM idp_flows f WHERE f.user_agent_id = ua.id) LIMIT ` + db.Batch + `)`},
		{Table: "pushed_requests", Args: at,
			Query: `DELETE FROM pushed_requests WHERE uri_hash IN (SELECT uri_hash FROM pushed_requests WHERE expires_at <= ? LIMIT ` + db.Batch + `)`},
		{Table: "device_attempts", Args: func(now time.Time) []any { return []any{now.Add(-DeviceAttemptWindow)} },
			Query: `DELETE FROM device_attempts WHERE user_agent_id IN (SELECT user_agent_id FROM device_attempts WHERE window_start <= ? LIMIT ` + db.Batch + `)`},
	}
}

// Prune runs PruneSteps once at now and returns how many rows it deleted.
func (s *Store) Prune(ctx context.Context, now time.Time) (int64, error) {
	r, err := (&db.Pruner{DB: s.DB, Service: "authn", Steps: PruneSteps(s.Lifetimes)}).RunOnce(ctx, now)
	var n int64
	for _, d := range r.Deleted {
		n += d
	}
	return n, err
}

// consentKey is the stored form of a scope set: sorted, space-separated.
func consentKey(scopes []string) string {
	s := slices.Clone(scopes)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), " ")
}

// Consented reports whether the user consented to the client, under the
// project grant grantID ("" for none), for a scope set containing every
// one of scopes. A consent given under another grant (one removed since,
// and made again) does not count.
func (s *Store) Consented(ctx context.Context, userID, clientID, grantID string, scopes []string) (bool, error) {
	var sets []string
	if err := s.DB.Select(ctx, &sets, `SELECT scopes FROM consents WHERE user_id = ? AND client_id = ? AND grant_id = ?`,
		userID, clientID, grantID); err != nil {
		return false, fmt.Errorf("read consents: %w", err)
	}
	for _, set := range sets {
		have := strings.Fields(set)
		if !slices.ContainsFunc(scopes, func(sc string) bool { return !slices.Contains(have, sc) }) {
			return true, nil
		}
	}
	return false, nil
}

// AddConsent records the user's consent to the client, under the project
// grant grantID, for scopes.
func (s *Store) AddConsent(ctx context.Context, userID, clientID, grantID string, scopes []string, now time.Time) error {
	_, err := s.DB.Exec(ctx, `INSERT INTO consents (user_id, client_id, scopes, grant_id, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (user_id, client_id, scopes) DO UPDATE SET grant_id = excluded.grant_id, created_at = excluded.created_at`,
		userID, clientID, consentKey(scopes), grantID, now)
	if err != nil {
		return fmt.Errorf("record consent: %w", err)
	}
	return nil
}

// IdPFlow is a sign-in in flight at an external identity provider.
type IdPFlow struct {
	StateHash     string    `db:"state_hash"`
	UserAgentID   string    `db:"user_agent_id"`
	AuthRequestID string    `db:"auth_request_id"`
	IdPID         string    `db:"idp_id"`
	OrgID         string    `db:"org_id"`
	Nonce         string    `db:"nonce"`
	Verifier      string    `db:"verifier"`
	ExpiresAt     time.Time `db:"expires_at"`
}

// HashState is the stored form of an IdP state value.
func HashState(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// CreateIdPFlow stores a sign-in in flight.
func (s *Store) CreateIdPFlow(ctx context.Context, f IdPFlow) error {
	_, err := s.DB.Relaxed().Exec(ctx, `INSERT INTO idp_flows (state_hash, user_agent_id, auth_request_id, idp_id, org_id, nonce, verifier, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, f.StateHash, f.UserAgentID, f.AuthRequestID, f.IdPID, f.OrgID, f.Nonce, f.Verifier, f.ExpiresAt)
	if err != nil {
		return fmt.Errorf("create idp flow: %w", err)
	}
	return nil
}

// TakeIdPFlow returns and deletes the flow of state for the browser: once
// only, so a replayed callback finds nothing. An expired flow, one of
// another browser or an unknown state is ErrNotFound.
func (s *Store) TakeIdPFlow(ctx context.Context, state, userAgentID string, now time.Time) (IdPFlow, error) {
	var f IdPFlow
	h := HashState(state)
	if err := s.DB.Get(ctx, &f, `SELECT state_hash, user_agent_id, auth_request_id, idp_id, org_id, nonce, verifier, expires_at
		FROM idp_flows WHERE state_hash = ? AND user_agent_id = ?`, h, userAgentID); err != nil {
		return IdPFlow{}, fmt.Errorf("idp flow: %w", db.NotFound(err))
	}
	res, err := s.DB.Exec(ctx, `DELETE FROM idp_flows WHERE state_hash = ?`, h)
	if err != nil {
		return IdPFlow{}, fmt.Errorf("take idp flow: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 || !now.Before(f.ExpiresAt) {
		return IdPFlow{}, fmt.Errorf("idp flow: %w", ErrNotFound)
	}
	return f, nil
}
