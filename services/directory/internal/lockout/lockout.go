package lockout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// The policy. Every counter lives in the database, so a restart resets
// none, and every replica sees the same.
//
//   - Per (account, client address): PairFreeFailures failures are free;
//     after the nth (n ≥ PairFreeFailures) the pair waits
//     PairBaseDelay·2^(n−PairFreeFailures), at most PairMaxDelay. A pair
//     quiet for PairWindow starts afresh, and so does one that signs in.
//     This is the default: it slows a guesser down without letting anyone
//     lock a user out from another address.
//   - Per client address: AddressMaxFailures failures, each within
//     AddressWindow of the previous one, refuse the address for
//     AddressLockTime.
//   - Per account, only where the organization opts in
//     (lockout_max_attempts > 0): that many failures in a row (each within
//     AccountWindow of the previous one) refuse the account from every
//     address for AccountLockTime. Anyone who knows a login name can
//     trigger it, so it is off by default.
//
// Rows untouched for Retention are pruned (it is at least every window and
// wait above).
//
// Counts are written through db.DB.Relaxed: a power failure (not a crash
// of the process) may forget the last fraction of a second of them, which
// no attacker can time; every attempt still counts before its check, so
// concurrent attempts share no slot.
const (
	PairFreeFailures   = 3
	PairBaseDelay      = time.Second
	PairMaxDelay       = 15 * time.Minute
	PairWindow         = time.Hour
	AddressMaxFailures = 20
	AddressWindow      = 15 * time.Minute
	AddressLockTime    = 15 * time.Minute
	AccountWindow      = 24 * time.Hour
	AccountLockTime    = 15 * time.Minute
	Retention          = 24 * time.Hour
)

// PairDelay is how long a (account, address) pair waits after its nth
// failure: 0 before PairFreeFailures, then 1 s, 2 s, 4 s … up to
// PairMaxDelay.
func PairDelay(n int) time.Duration {
	if n < PairFreeFailures {
		return 0
	}
	d := PairBaseDelay
	for i := PairFreeFailures; i < n && d < PairMaxDelay; i++ {
		d *= 2
	}
	return min(d, PairMaxDelay)
}

// UserAccount is the account of a user: its failures count together
// whichever of its login names was typed.
func UserAccount(userID string) string { return "user:" + userID }

// FactorAccount is the account of a user's second-factor checks. It is
// not UserAccount: a correct password forgets UserAccount's failures, so
// sharing it would let whoever knows the password reset the count of
// wrong codes before each guess.
func FactorAccount(userID string) string { return "factor:" + userID }

// NameAccount is the account of a login name that matches no user of the
// organization (normalised by the caller), so that unknown names are
// counted exactly like known ones.
func NameAccount(orgID, normalizedName string) string { return "name:" + orgID + ":" + normalizedName }

// Attempt is one password check.
type Attempt struct {
	Account string
	// Address is the client address; "" when unknown (then only the
	// account's counters apply).
	Address string
	// MaxAccountFailures is the organization's opt-in account lock
	// (lockout_max_attempts); 0 for none.
	MaxAccountFailures int
}

// pair is the subject of the (account, address) counter; the quoted
// address cannot run into the account.
func (a Attempt) pair() string { return "pair:" + strconv.Quote(Subnet(a.Address)) + ":" + a.Account }

func (a Attempt) address() string { return "addr:" + Subnet(a.Address) }

// Subnet is what the counters of an address count: an IPv6 address's /64,
// which one host commonly holds whole (as edge's rate limits key it), so
// that rotating through it does not start the counts afresh at every
// address; an IPv4 address (IPv4-mapped ones unmapped) as it is; anything
// else unchanged.
func Subnet(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	if a = a.Unmap(); a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}

// rule is how one kind of subject counts.
type rule struct {
	window time.Duration             // a failure longer after the previous one starts afresh
	wait   func(n int) time.Duration // refusal after the nth failure; 0 for none
	fresh  bool                      // a served wait starts the count afresh
}

var (
	pairRule    = rule{window: PairWindow, wait: PairDelay}
	addressRule = rule{window: AddressWindow, fresh: true, wait: func(n int) time.Duration {
		if n >= AddressMaxFailures {
			return AddressLockTime
		}
		return 0
	}}
)

func accountRule(max int) rule {
	return rule{window: AccountWindow, fresh: true, wait: func(n int) time.Duration {
		if n >= max {
			return AccountLockTime
		}
		return 0
	}}
}

// Store reads and writes login_failures.
type Store struct {
	DB  *db.DB
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now().UTC()
}

// Begin reports whether a may check a password now. An allowed attempt is
// counted in advance as a failure of its pair (and of its account where
// the organization opts in), so concurrent attempts cannot all pass
// through one free slot; Succeeded forgets those counts. A refused attempt
// is counted nowhere, so hammering does not lengthen the wait.
func (s *Store) Begin(ctx context.Context, a Attempt) (bool, error) {
	now := s.now()
	allowed := false
	err := s.DB.Relaxed().InTx(ctx, func(tx *db.Tx) error {
		var err error
		allowed, err = s.allow(ctx, tx, a, now)
		return err
	})
	return allowed, err
}

// allow is Begin through q.
func (s *Store) allow(ctx context.Context, q db.Querier, a Attempt, now time.Time) (bool, error) {
	subjects := []any{a.pair()}
	if a.Address != "" {
		subjects = append(subjects, a.address())
	}
	if a.MaxAccountFailures > 0 {
		subjects = append(subjects, a.Account)
	}
	var locked int
	if err := q.Get(ctx, &locked, `SELECT COUNT(*) FROM login_failures WHERE locked_until > ? AND subject IN (?`+
		strings.Repeat(", ?", len(subjects)-1)+`)`, append([]any{now}, subjects...)...); err != nil {
		return false, fmt.Errorf("lockout: read: %w", err)
	}
	if locked > 0 {
		return false, nil
	}
	if ok, err := count(ctx, q, a.pair(), a.Account, pairRule, now); err != nil || !ok {
		return false, err
	}
	if a.MaxAccountFailures > 0 {
		return count(ctx, q, a.Account, a.Account, accountRule(a.MaxAccountFailures), now)
	}
	return true, nil
}

// Outcome is how a guarded check ended.
type Outcome int

// Outcomes of Guard.
const (
	// Refused: a wait or lock runs; the check did not run and nothing
	// was counted.
	Refused Outcome = iota
	// Wrong: the check failed and counts (Begin and Failed).
	Wrong
	// Passed: the check passed and the pair's and account's counts are
	// forgotten (Succeeded).
	Passed
)

// GuardIn runs check as attempt a in tx, a transaction of Relaxed that
// may have read what a depends on (the user and its organization's
// lock): Begin, check, then Succeeded or Failed, in that one transaction
// with check's own writes, so that a one-time code costs one commit (a
// second factor is on every login's path). On PostgreSQL the pair's row
// stays locked until the commit, so a concurrent attempt of the pair sees
// the first one's count and step. check reports whether it passed; an
// error (check's or the counters') must roll tx back.
func (s *Store) GuardIn(ctx context.Context, tx *db.Tx, a Attempt, check func(context.Context, *db.Tx) (bool, error)) (Outcome, error) {
	now := s.now()
	allowed, err := s.allow(ctx, tx, a, now)
	if err != nil || !allowed {
		return Refused, err
	}
	passed, err := check(ctx, tx)
	switch {
	case err != nil:
		return Refused, err
	case passed:
		return Passed, Reset(ctx, tx, a)
	}
	if a.Address != "" {
		if _, err := count(ctx, tx, a.address(), "", addressRule, now); err != nil {
			return Refused, err
		}
	}
	return Wrong, nil
}

// Failed counts a failed check of an allowed attempt (a wrong password,
// or a name without a usable password) against its client address; the
// pair and account counted it in Begin.
func (s *Store) Failed(ctx context.Context, a Attempt) error {
	if a.Address == "" {
		return nil
	}
	return s.DB.Relaxed().InTx(ctx, func(tx *db.Tx) error {
		_, err := count(ctx, tx, a.address(), "", addressRule, s.now())
		return err
	})
}

// Succeeded forgets the pair's and the account's failures after a correct
// password. The address keeps its count: one success does not excuse the
// other names tried from there.
func (s *Store) Succeeded(ctx context.Context, a Attempt) error {
	return Reset(ctx, s.DB.Relaxed(), a)
}

// Reset is Succeeded through q: in the transaction of the check it
// concludes (a factor's code, whose acceptance is written anyway).
func Reset(ctx context.Context, q db.Querier, a Attempt) error {
	if _, err := q.Exec(ctx, `DELETE FROM login_failures WHERE subject IN (?, ?)`, a.pair(), a.Account); err != nil {
		return fmt.Errorf("lockout: reset: %w", err)
	}
	return nil
}

// ForgetAccount deletes every counter of account: its pairs with every
// address and its own (UnlockUser, in the event's transaction).
func ForgetAccount(ctx context.Context, q db.Querier, account string) error {
	if _, err := q.Exec(ctx, `DELETE FROM login_failures WHERE account = ?`, account); err != nil {
		return fmt.Errorf("lockout: forget %s: %w", account, err)
	}
	return nil
}

// count records a failure of subject under r through q unless subject is
// refused until later; it reports whether it counted (false: refused).
//
// One upsert counts and reads the new count: it starts afresh after the
// window (or, where r.fresh, after a served wait) and updates nothing
// while the subject is refused. A second statement sets the wait only
// when the count reaches one. q is a transaction: on PostgreSQL the upsert
// locks the row until commit, so a concurrent attempt on the subject sees
// the wait (SQLite transactions write one at a time anyway).
func count(ctx context.Context, q db.Querier, subject, account string, r rule, now time.Time) (bool, error) {
	var acc any
	if account != "" {
		acc = account
	}
	afresh := `login_failures.updated_at < ?`
	if r.fresh {
		afresh += ` OR login_failures.locked_until IS NOT NULL`
	}
	var n int
	err := q.Get(ctx, &n, `INSERT INTO login_failures (subject, account, failures, updated_at) VALUES (?, ?, 1, ?)
		ON CONFLICT (subject) DO UPDATE SET account = excluded.account,
			failures = CASE WHEN `+afresh+` THEN 1 ELSE login_failures.failures + 1 END,
			locked_until = NULL, updated_at = excluded.updated_at
		WHERE login_failures.locked_until IS NULL OR login_failures.locked_until <= ?
		RETURNING failures`, subject, acc, now, now.Add(-r.window), now)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // refused until later
	}
	if err != nil {
		return false, fmt.Errorf("lockout: count: %w", err)
	}
	if d := r.wait(n); d > 0 {
		if _, err := q.Exec(ctx, `UPDATE login_failures SET locked_until = ? WHERE subject = ?`, now.Add(d), subject); err != nil {
			return false, fmt.Errorf("lockout: count: %w", err)
		}
	}
	return true, nil
}

// PruneSteps delete counters untouched for Retention that block nothing.
func PruneSteps() []db.PruneStep {
	return []db.PruneStep{{
		Table: "login_failures",
		Query: `DELETE FROM login_failures WHERE subject IN (SELECT subject FROM login_failures
			WHERE updated_at < ? AND (locked_until IS NULL OR locked_until <= ?) LIMIT ` + db.Batch + `)`,
		Args: func(now time.Time) []any { return []any{now.Add(-Retention), now} },
	}}
}

// Prune runs PruneSteps once and returns how many rows it deleted.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	r, err := (&db.Pruner{DB: s.DB, Service: "directory", Steps: PruneSteps()}).RunOnce(ctx, s.now())
	if err != nil {
		return 0, fmt.Errorf("lockout: %w", err)
	}
	return r.Deleted["login_failures"], nil
}
