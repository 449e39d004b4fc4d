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
// no attacker can time; every password attempt still counts before its
// check, and every wrong code before its answer (a right one passes only
// where no count has set a wait: Guard), so concurrent attempts share no
// slot.
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
	window time.Duration // a failure longer after the previous one starts afresh
	fresh  bool          // a served wait starts the count afresh
	// The nth failure (n ≥ from) waits waits[n−from], the last rung for
	// every n beyond the ladder; one before from waits nothing.
	from  int
	waits []time.Duration
	sql   string // count's statement for this rule's shape (countSQL)
}

func newRule(window time.Duration, fresh bool, from int, waits []time.Duration) rule {
	r := rule{window: window, fresh: fresh, from: from, waits: waits}
	r.sql = r.countSQL()
	return r
}

// wait is how long the nth failure waits.
func (r rule) wait(n int) time.Duration {
	if n < r.from {
		return 0
	}
	return r.waits[min(n-r.from, len(r.waits)-1)]
}

var (
	pairRule    = newRule(PairWindow, false, PairFreeFailures, pairLadder())
	addressRule = newRule(AddressWindow, true, AddressMaxFailures, []time.Duration{AddressLockTime})
)

// pairLadder is PairDelay from PairFreeFailures up to its cap.
func pairLadder() []time.Duration {
	var out []time.Duration
	for n := PairFreeFailures; ; n++ {
		out = append(out, PairDelay(n))
		if out[len(out)-1] == PairMaxDelay {
			return out
		}
	}
}

// accountRule is the opt-in account lock after max failures. Its
// statement is the address rule's shape (one rung, fresh after a wait).
func accountRule(max int) rule {
	return rule{window: AccountWindow, fresh: true, from: max, waits: []time.Duration{AccountLockTime}, sql: addressRule.sql}
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
//
// It needs no transaction: the read of the locks is one statement, and
// each count one upsert that also sets the wait it earns, so a concurrent
// attempt on the subject sees the count and the wait together.
func (s *Store) Begin(ctx context.Context, a Attempt) (bool, error) {
	now := s.now()
	q := s.DB.Relaxed()
	expr, args := a.Locked(now, a.accountLock())
	var locked int
	if err := q.Get(ctx, &locked, `SELECT `+expr, args...); err != nil {
		return false, fmt.Errorf("lockout: read: %w", err)
	}
	if locked > 0 {
		return false, nil
	}
	return take(ctx, q, a, now)
}

// accountLock is a's account lock as the SQL expression Locked takes.
func (a Attempt) accountLock() string {
	if a.MaxAccountFailures > 0 {
		return "1"
	}
	return "0"
}

// Locked is a scalar subquery, with its arguments, that counts a's
// subjects refused at now: its pair, its address and, where the SQL
// expression accountLock (the organization's lockout_max_attempts) is
// above 0, its account. Above 0, a is refused (Guard's locked). A
// factor's check reads it in the statement that reads the user and the
// factor (users.GetForTOTP).
func (a Attempt) Locked(now time.Time, accountLock string) (string, []any) {
	if a.Address == "" {
		return `(SELECT COUNT(*) FROM login_failures WHERE locked_until > ? AND (subject = ? OR subject = ? AND ` +
			accountLock + ` > 0))`, []any{now, a.pair(), a.Account}
	}
	return `(SELECT COUNT(*) FROM login_failures WHERE locked_until > ? AND (subject IN (?, ?) OR subject = ? AND ` +
		accountLock + ` > 0))`, []any{now, a.pair(), a.address(), a.Account}
}

// Counted is a scalar subquery, with its arguments, that counts a's
// pair's and account's counters: what a right guess forgets (Guard's
// counted; 0 spares the forgetting's statement on SQLite).
func (a Attempt) Counted() (string, []any) {
	return `(SELECT COUNT(*) FROM login_failures WHERE subject IN (?, ?))`, []any{a.pair(), a.Account}
}

// take counts a in advance: its pair, then its account where the
// organization opts in. It reports false when either is refused.
func take(ctx context.Context, q db.Querier, a Attempt, now time.Time) (bool, error) {
	if ok, err := count(ctx, q, a.pair(), a.Account, pairRule, now); err != nil || !ok {
		return false, err
	}
	if a.MaxAccountFailures > 0 {
		return count(ctx, q, a.Account, a.Account, accountRule(a.MaxAccountFailures), now)
	}
	return true, nil
}

// Outcome is how a guarded guess ended.
type Outcome int

// Outcomes of Guard.
const (
	// Refused: a wait or lock runs; nothing was recorded or counted.
	Refused Outcome = iota
	// Wrong: the guess was wrong and counts (Begin and Failed).
	Wrong
	// Passed: the guess was right; it is recorded and the pair's and
	// account's counts are forgotten.
	Passed
	// Lost: the guess was right by the caller's read, but its record
	// changed no row: a concurrent check recorded the same one-time code
	// first (or the factor changed since the read). Nothing was recorded
	// or counted, and no lock held.
	Lost
)

// A Guess is a one-time code's guess as Guard checks it. It tells,
// without writing, whether the code is right: for a right one it returns
// the statement that records it, with its arguments: an UPDATE of one
// row that changes it once (a code's step: of two checks racing with one
// code, one changes it), whose WHERE is a conjunction that Guard extends
// with AND; "" for a wrong one.
type Guess func() (update string, args []any, err error)

// Guard checks guess as attempt a. locked and counted are a's Locked and
// Counted, read by the caller in the statement that read what guess needs
// (a second factor is on every login's path, so its check costs as few
// statements as it can): locked above 0 refuses a uncounted.
//
// A wrong guess is counted on the pair and the account (Begin's count)
// and then, unless refused there, on the address; one whose check fails
// on an error is counted likewise (fails closed) and returns the error.
// A right guess is recorded only while no lock of a holds, in one
// statement serialized with a's counts (pass), and forgets them. So a
// right guess costs no count, and concurrent guesses still share no free
// slot: each wrong one is counted by an upsert that sets the wait it
// earns before it answers, and the right one passes only ahead of that
// wait. No transaction spans the statements.
func (s *Store) Guard(ctx context.Context, a Attempt, locked, counted int, guess Guess) (Outcome, error) {
	if locked > 0 {
		return Refused, nil
	}
	now := s.now()
	q := s.DB.Relaxed()
	update, args, err := guess()
	if err == nil && update != "" {
		return a.pass(ctx, q, now, counted > 0, update, args)
	}
	if ok, terr := take(ctx, q, a, now); terr != nil || !ok {
		return Refused, errors.Join(err, terr)
	}
	if err != nil {
		return Refused, err
	}
	if a.Address != "" {
		if _, err := count(ctx, q, a.address(), "", addressRule, now); err != nil {
			return Refused, err
		}
	}
	return Wrong, nil
}

// pass runs update, a right guess's record, only where no lock of a holds
// at now, in one statement serialized with a's counts, and forgets a's
// counts after it. It answers Passed when update changed its row, else
// Refused when a lock held and Lost when none did (a concurrent check
// recorded first): the failed-attempt metric counts only refusals.
//
// On PostgreSQL the statement locks a's counters' rows FOR UPDATE, in
// subject order as ForgetAccount does (FOR UPDATE reads each one's latest
// version, after any count in flight, as the counts' upserts do), and
// forgets the counts in a WITH query of its own, so the record and the
// forgetting commit together; a counter made after the statement began
// counts after it. SQLite runs one write at a time, so the update's own
// read of the locks is serialized with the counts; the counts are
// forgotten in a second statement, only where counted (the caller's read)
// saw any: a count made since is kept, which fails closed.
func (a Attempt) pass(ctx context.Context, q db.Querier, now time.Time, counted bool, update string, args []any) (Outcome, error) {
	if q.Dialect() == db.Postgres {
		addr := a.pair() // no address: the pair stands in for it
		if a.Address != "" {
			addr = a.address()
		}
		const held = `SELECT 1 FROM lk WHERE locked_until > ? AND (subject <> ? OR `
		all := append([]any{a.pair(), addr, a.Account}, args...)
		all = append(all, now, a.Account, a.pair(), a.Account, now, a.Account)
		var r struct {
			Recorded bool `db:"recorded"`
			Held     bool `db:"held"`
		}
		if err := q.Get(ctx, &r, `WITH lk AS MATERIALIZED (SELECT subject, locked_until FROM login_failures WHERE subject IN (?, ?, ?) ORDER BY subject FOR UPDATE),
			step AS (`+update+` AND NOT EXISTS (`+held+a.accountLock()+` > 0)) RETURNING 1),
			forget AS (`+resetSQL+` AND EXISTS (SELECT 1 FROM step))
			SELECT EXISTS (SELECT 1 FROM step) AS recorded, EXISTS (`+held+a.accountLock()+` > 0)) AS held`, all...); err != nil {
			return Refused, fmt.Errorf("lockout: pass: %w", err)
		}
		return passOutcome(r.Recorded, r.Held), nil
	}
	locked, largs := a.Locked(now, a.accountLock())
	res, err := q.Exec(ctx, update+` AND `+locked+` = 0`, append(args, largs...)...)
	if err != nil {
		return Refused, fmt.Errorf("lockout: pass: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Refused, fmt.Errorf("lockout: pass: %w", err)
	}
	if n != 1 {
		// Rare (a lock, or a race): one more read tells which, for the
		// metric. A wait committed between the two statements reads as
		// a lock's refusal, the answer before Lost existed.
		var held int
		if err := q.Get(ctx, &held, `SELECT `+locked, largs...); err != nil {
			return Refused, fmt.Errorf("lockout: pass: %w", err)
		}
		return passOutcome(false, held > 0), nil
	}
	if counted {
		if err := Reset(ctx, q, a); err != nil {
			return Refused, err
		}
	}
	return Passed, nil
}

// passOutcome is pass's answer: whether the record changed its row, and
// whether a lock of the attempt held.
func passOutcome(recorded, held bool) Outcome {
	switch {
	case recorded:
		return Passed
	case held:
		return Refused
	}
	return Lost
}

// Failed counts a failed check of an allowed attempt (a wrong password,
// or a name without a usable password) against its client address; the
// pair and account counted it in Begin.
func (s *Store) Failed(ctx context.Context, a Attempt) error {
	if a.Address == "" {
		return nil
	}
	_, err := count(ctx, s.DB.Relaxed(), a.address(), "", addressRule, s.now())
	return err
}

// Succeeded forgets the pair's and the account's failures after a correct
// password. The address keeps its count: one success does not excuse the
// other names tried from there.
func (s *Store) Succeeded(ctx context.Context, a Attempt) error {
	return Reset(ctx, s.DB.Relaxed(), a)
}

// Reset is Succeeded through q.
func Reset(ctx context.Context, q db.Querier, a Attempt) error {
	if _, err := q.Exec(ctx, resetSQL, a.pair(), a.Account); err != nil {
		return fmt.Errorf("lockout: reset: %w", err)
	}
	return nil
}

const resetSQL = `DELETE FROM login_failures WHERE subject IN (?, ?)`

// ForgetAccount deletes every counter of account: its pairs with every
// address and its own (UnlockUser, in the event's transaction).
//
// On PostgreSQL it locks them in subject order first, as a right code's
// record does (pass): a statement that locks several counters in another
// order could each hold one the other waits for, and one of the two would
// fail on the deadlock.
func ForgetAccount(ctx context.Context, q db.Querier, account string) error {
	query := `DELETE FROM login_failures WHERE account = ?`
	if q.Dialect() == db.Postgres {
		query = `DELETE FROM login_failures WHERE subject IN (SELECT subject FROM login_failures WHERE account = ? ORDER BY subject FOR UPDATE)`
	}
	if _, err := q.Exec(ctx, query, account); err != nil {
		return fmt.Errorf("lockout: forget %s: %w", account, err)
	}
	return nil
}

// count records a failure of subject under r through q unless subject is
// refused until later; it reports whether it counted (false: refused).
//
// One upsert (r.sql) counts and sets the wait the new count earns: it
// starts afresh after the window (or, where r.fresh, after a served wait)
// and updates nothing while the subject is refused. On PostgreSQL the
// upsert locks the row for its statement, and SQLite writes one at a
// time, so a concurrent attempt on the subject sees the count and its
// wait together.
func count(ctx context.Context, q db.Querier, subject, account string, r rule, now time.Time) (bool, error) {
	var acc, first any
	if account != "" {
		acc = account
	}
	if d := r.wait(1); d > 0 {
		first = now.Add(d)
	}
	start, last := now.Add(-r.window), len(r.waits)-1
	args := make([]any, 0, 9+2*last)
	args = append(args, subject, acc, first, now, start, start, r.from+last, now.Add(r.waits[last]))
	for i := range last {
		args = append(args, r.from+i, now.Add(r.waits[i]))
	}
	var n int
	err := q.Get(ctx, &n, r.sql, append(args, now)...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // refused until later
	}
	if err != nil {
		return false, fmt.Errorf("lockout: count: %w", err)
	}
	return true, nil
}

// countSQL is count's upsert for r's shape. The new count is n =
// failures + 1 (1 afresh); the wait is a CASE over the ladder's rungs,
// whose times count passes: the last rung for n ≥ its n, then each
// other. Its first branch, the inserted value, types the others on
// PostgreSQL.
func (r rule) countSQL() string {
	afresh := `login_failures.updated_at < ?`
	if r.fresh {
		afresh = `(` + afresh + ` OR login_failures.locked_until IS NOT NULL)`
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO login_failures (subject, account, failures, locked_until, updated_at) VALUES (?, ?, 1, ?, ?)
		ON CONFLICT (subject) DO UPDATE SET account = excluded.account,
			failures = CASE WHEN ` + afresh + ` THEN 1 ELSE login_failures.failures + 1 END,
			locked_until = CASE WHEN ` + afresh + ` THEN excluded.locked_until
				WHEN login_failures.failures + 1 >= ? THEN ?`)
	for range len(r.waits) - 1 {
		b.WriteString(` WHEN login_failures.failures + 1 = ? THEN ?`)
	}
	b.WriteString(` END,
			updated_at = excluded.updated_at
		WHERE login_failures.locked_until IS NULL OR login_failures.locked_until <= ?
		RETURNING failures`)
	return b.String()
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
