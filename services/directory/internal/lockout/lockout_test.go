package lockout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T, d db.Dialect) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	return &Store{DB: storetest.Open(t, d), Now: c.now}, c
}

// fail is one attempt that is allowed and then fails.
func fail(t *testing.T, s *Store, a Attempt) {
	t.Helper()
	ok, err := s.Begin(context.Background(), a)
	if err != nil || !ok {
		t.Fatalf("Begin %+v: %v, %v; want allowed", a, ok, err)
	}
	if err := s.Failed(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func allowed(t *testing.T, s *Store, a Attempt) bool {
	t.Helper()
	ok, err := s.Begin(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestPairDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{
		0: 0, 1: 0, 2: 0, 3: time.Second, 4: 2 * time.Second, 5: 4 * time.Second,
		12: 512 * time.Second, 13: PairMaxDelay, 14: PairMaxDelay, 1000: PairMaxDelay,
	} {
		if got := PairDelay(n); got != want {
			t.Errorf("PairDelay(%d) = %v; want %v", n, got, want)
		}
	}
}

func TestProgressiveDelay(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		a := Attempt{Account: UserAccount("u1"), Address: "192.0.2.1"}
		for range PairFreeFailures {
			fail(t, s, a)
		}
		// Each further attempt waits 1 s, 2 s, 4 s after the previous
		// failure; one before then is refused and not counted.
		for _, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			for range 3 {
				if allowed(t, s, a) {
					t.Fatalf("attempt before the %v wait: allowed; want refused", wait)
				}
			}
			c.add(wait - time.Millisecond)
			if allowed(t, s, a) {
				t.Fatalf("attempt 1 ms before the %v wait ends: allowed; want refused", wait)
			}
			c.add(time.Millisecond)
			fail(t, s, a)
		}
		// The same account from another address, and another account from
		// this address, are not slowed down.
		fail(t, s, Attempt{Account: a.Account, Address: "192.0.2.2"})
		fail(t, s, Attempt{Account: UserAccount("u2"), Address: a.Address})
		// A success starts the pair afresh.
		c.add(8 * time.Second)
		if !allowed(t, s, a) {
			t.Fatal("attempt after the 8 s wait: refused")
		}
		if err := s.Succeeded(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		for range PairFreeFailures {
			fail(t, s, a)
		}
		if allowed(t, s, a) {
			t.Fatal("after a success and 3 new failures: allowed at once; want the 1 s wait")
		}
		// So does an hour without failures.
		c.add(PairWindow + time.Second)
		for range PairFreeFailures {
			fail(t, s, a)
		}
	})
}

func TestAddressLimit(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		addr := "198.51.100.7"
		for i := range AddressMaxFailures {
			fail(t, s, Attempt{Account: NameAccount("org", fmt.Sprintf("nobody-%d", i)), Address: addr})
			c.add(time.Second)
		}
		if allowed(t, s, Attempt{Account: UserAccount("grace"), Address: addr}) {
			t.Fatalf("after %d failures from one address: allowed; want refused", AddressMaxFailures)
		}
		if !allowed(t, s, Attempt{Account: UserAccount("grace"), Address: "198.51.100.8"}) {
			t.Fatal("another address: refused")
		}
		c.add(AddressLockTime)
		// The lock is served: the address counts afresh.
		for i := range AddressMaxFailures - 1 {
			fail(t, s, Attempt{Account: NameAccount("org", fmt.Sprintf("again-%d", i)), Address: addr})
		}
		if !allowed(t, s, Attempt{Account: UserAccount("grace"), Address: addr}) {
			t.Fatal("after the address lock and fewer new failures than the limit: refused")
		}
	})
}

func TestAccountLockIsOptIn(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		for _, max := range []int{0, 5} {
			acct := UserAccount(fmt.Sprint("user-", max))
			for i := range 5 {
				fail(t, s, Attempt{Account: acct, Address: fmt.Sprint("203.0.113.", i), MaxAccountFailures: max})
			}
			got := allowed(t, s, Attempt{Account: acct, Address: "203.0.113.99", MaxAccountFailures: max})
			if got != (max == 0) {
				t.Errorf("lockout_max_attempts %d, 5 failures from 5 addresses, a 6th address: allowed %v; want %v", max, got, max == 0)
			}
		}
		c.add(AccountLockTime)
		if !allowed(t, s, Attempt{Account: UserAccount("user-5"), Address: "203.0.113.99", MaxAccountFailures: 5}) {
			t.Error("after the account lock: refused")
		}
	})
}

// TestConcurrentAttemptsShareNoSlot: when a wait ends, of many attempts at
// once exactly one checks a password; the others are refused, so
// parallel requests do not multiply the guesses the delay allows.
func TestConcurrentAttemptsShareNoSlot(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		a := Attempt{Account: NameAccount("org", "ghost"), Address: "192.0.2.9", MaxAccountFailures: 10}
		for range PairFreeFailures {
			fail(t, s, a)
		}
		c.add(time.Second)
		const n = 8
		var wg sync.WaitGroup
		results := make(chan bool, n)
		for range n {
			wg.Go(func() {
				ok, err := s.Begin(context.Background(), a)
				if err != nil {
					t.Error(err)
				}
				results <- ok
			})
		}
		wg.Wait()
		close(results)
		won := 0
		for ok := range results {
			if ok {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent attempts allowed; want exactly 1", won, n)
		}
	})
}

func TestForgetAccount(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, _ := newStore(t, d)
		ctx := context.Background()
		acct := UserAccount("u1")
		for _, addr := range []string{"192.0.2.1", "192.0.2.2"} {
			for range PairFreeFailures {
				fail(t, s, Attempt{Account: acct, Address: addr, MaxAccountFailures: 6})
			}
		}
		other := Attempt{Account: UserAccount("u2"), Address: "192.0.2.1"}
		for range PairFreeFailures {
			fail(t, s, other)
		}
		if allowed(t, s, Attempt{Account: acct, Address: "192.0.2.3", MaxAccountFailures: 6}) {
			t.Fatal("account lock: allowed")
		}
		if err := ForgetAccount(ctx, s.DB, acct); err != nil {
			t.Fatal(err)
		}
		for _, addr := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
			if !allowed(t, s, Attempt{Account: acct, Address: addr, MaxAccountFailures: 6}) {
				t.Errorf("after ForgetAccount, from %s: refused", addr)
			}
		}
		// Another account's delay and the addresses' counts stay.
		if allowed(t, s, other) {
			t.Error("another account's pair: forgotten too")
		}
		var addrFailures int
		if err := s.DB.Get(ctx, &addrFailures, `SELECT failures FROM login_failures WHERE subject = ?`, "addr:192.0.2.1"); err != nil || addrFailures != 2*PairFreeFailures {
			t.Errorf("address count %d, %v; want %d", addrFailures, err, 2*PairFreeFailures)
		}
	})
}

// TestPrune: counters untouched for a day go, in batches; recent ones and
// ones still refusing stay.
func TestPrune(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		ctx := context.Background()
		old := c.now().Add(-Retention - time.Minute)
		const many = 2*db.PruneBatch + 17
		if err := s.DB.InTx(ctx, func(tx *db.Tx) error {
			for i := range many {
				if _, err := tx.Exec(ctx, `INSERT INTO login_failures (subject, account, failures, updated_at) VALUES (?, ?, 1, ?)`,
					fmt.Sprint("pair:old-", i), "name:org:old", old); err != nil {
					return err
				}
			}
			future := c.now().Add(time.Minute)
			for _, r := range []struct {
				subject string
				at      time.Time
				until   *time.Time
			}{{"pair:recent", c.now().Add(-time.Hour), nil}, {"addr:still-locked", old, &future}} {
				if _, err := tx.Exec(ctx, `INSERT INTO login_failures (subject, failures, locked_until, updated_at) VALUES (?, 20, ?, ?)`,
					r.subject, r.until, r.at); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		n, err := s.Prune(ctx)
		if err != nil || n != many {
			t.Fatalf("Prune: %d rows, %v; want %d", n, err, many)
		}
		var left []string
		if err := s.DB.Select(ctx, &left, `SELECT subject FROM login_failures ORDER BY subject`); err != nil {
			t.Fatal(err)
		}
		if len(left) != 2 || left[0] != "addr:still-locked" || left[1] != "pair:recent" {
			t.Fatalf("left %v; want the recent and the still locked row", left)
		}
	})
}

// One IPv6 host holds a /64: rotating through it neither escapes the
// address limit nor starts an (account, address) pair afresh.
func TestIPv6SubnetCountsAsOneAddress(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		for i := range AddressMaxFailures {
			fail(t, s, Attempt{Account: NameAccount("org", fmt.Sprintf("nobody-%d", i)), Address: fmt.Sprintf("2001:db8:1:2::%x", i+1)})
			c.add(time.Second)
		}
		if allowed(t, s, Attempt{Account: UserAccount("grace"), Address: "2001:db8:1:2:ffff::1"}) {
			t.Fatalf("after %d failures from one /64: allowed from another address of it; want refused", AddressMaxFailures)
		}
		if !allowed(t, s, Attempt{Account: UserAccount("grace"), Address: "2001:db8:1:3::1"}) {
			t.Fatal("another /64: refused")
		}
		// The pair's delay follows the account across the /64 too.
		c.add(AddressLockTime)
		for i := range 3 {
			fail(t, s, Attempt{Account: UserAccount("ada"), Address: fmt.Sprintf("2001:db8:9:9::%x", i+1)})
		}
		if allowed(t, s, Attempt{Account: UserAccount("ada"), Address: "2001:db8:9:9::99"}) {
			t.Fatal("after 3 failures of one account from one /64: allowed at once from a fresh address of it; want a delay")
		}
	})
	for in, want := range map[string]string{"2001:db8::1": "2001:db8::/64", "::ffff:198.51.100.7": "198.51.100.7", "198.51.100.7": "198.51.100.7", "": "", "not-an-address": "not-an-address"} {
		if got := Subnet(in); got != want {
			t.Errorf("Subnet(%q) = %q; want %q", in, got, want)
		}
	}
}

// Guard counts a wrong guess as Begin and Failed do (and one whose check
// fails on an error on the pair and account, returning the error), refuses
// uncounted while a's read says locked, records a right guess only while
// no lock holds, even one set after the caller's read, and then forgets
// the pair's and account's counts and keeps the address's; a right guess
// whose record lost to a concurrent one is refused uncounted. Concurrent
// wrong guesses share no free slot.
func TestGuard(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		ctx := context.Background()
		codeTable(t, s, "guard_codes")
		a := Attempt{Account: FactorAccount("u1"), Address: "192.0.2.1", MaxAccountFailures: 10}
		failures := func(subject string) int {
			t.Helper()
			var n int
			if err := s.DB.Get(ctx, &n, `SELECT COALESCE(MAX(failures), 0) FROM login_failures WHERE subject = ?`, subject); err != nil {
				t.Fatal(err)
			}
			return n
		}
		step := func() int64 {
			t.Helper()
			var n int64
			if err := s.DB.Get(ctx, &n, `SELECT last_step FROM guard_codes WHERE id = 'c1'`); err != nil {
				t.Fatal(err)
			}
			return n
		}
		read := func() (locked, counted int) {
			t.Helper()
			lexpr, largs := a.Locked(c.now(), "?")
			cexpr, cargs := a.Counted()
			var row struct {
				Locked  int `db:"locked"`
				Counted int `db:"counted"`
			}
			if err := s.DB.Get(ctx, &row, `SELECT `+lexpr+` AS locked, `+cexpr+` AS counted`,
				append(append(largs, a.MaxAccountFailures), cargs...)...); err != nil {
				t.Fatal(err)
			}
			return row.Locked, row.Counted
		}
		wrong := func() (string, []any, error) { return "", nil, nil }
		right := func(n int64) Guess {
			return func() (string, []any, error) {
				return `UPDATE guard_codes SET last_step = ? WHERE id = 'c1' AND last_step < ?`, []any{n, n}, nil
			}
		}
		guard := func(g Guess) (Outcome, error) {
			t.Helper()
			locked, counted := read()
			return s.Guard(ctx, a, locked, counted, g)
		}
		if out, err := guard(wrong); err != nil || out != Wrong || failures(a.pair()) != 1 || failures(a.address()) != 1 || failures(a.Account) != 1 {
			t.Fatalf("a wrong code: %v, %v, pair %d, address %d, account %d; want Wrong and 1 each",
				out, err, failures(a.pair()), failures(a.address()), failures(a.Account))
		}
		boom := errors.New("boom")
		if _, err := guard(func() (string, []any, error) { return "", nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("the check's error: %v; want it returned", err)
		}
		if failures(a.pair()) != 2 || failures(a.address()) != 1 {
			t.Fatalf("after a check's error: pair %d, address %d; want the attempt counted (2) as a pair's, not an address's, failure",
				failures(a.pair()), failures(a.address()))
		}
		// A right code read before the third failure set the pair's wait:
		// its record sees the wait.
		locked, counted := read()
		guard(wrong)
		if out, err := s.Guard(ctx, a, locked, counted, right(5)); err != nil || out != Refused || step() != 0 {
			t.Fatalf("a right code after a wait began since its read: %v, %v, step %d; want Refused, unrecorded", out, err, step())
		}
		if out, err := guard(right(5)); err != nil || out != Refused || step() != 0 {
			t.Fatalf("a right code during the wait: %v, %v, step %d; want Refused, unrecorded", out, err, step())
		}
		if failures(a.pair()) != PairFreeFailures || failures(a.address()) != 2 {
			t.Fatalf("a refused attempt was counted: pair %d, address %d; want %d, 2", failures(a.pair()), failures(a.address()), PairFreeFailures)
		}
		c.add(time.Second)
		if out, err := guard(right(5)); err != nil || out != Passed || step() != 5 || failures(a.pair()) != 0 || failures(a.Account) != 0 || failures(a.address()) != 2 {
			t.Fatalf("a right code: %v, %v, step %d, pair %d, account %d, address %d; want Passed, step 5, the pair and account forgotten, the address kept",
				out, err, step(), failures(a.pair()), failures(a.Account), failures(a.address()))
		}
		guard(wrong)
		if out, err := guard(right(5)); err != nil || out != Lost || failures(a.pair()) != 1 || failures(a.address()) != 3 {
			t.Fatalf("a code already recorded (a lost race): %v, %v, pair %d, address %d; want Lost (no lock held), uncounted, nothing forgotten",
				out, err, failures(a.pair()), failures(a.address()))
		}

		// A wait that a concurrent count commits while a right code's
		// record waits for it refuses the code: the record reads the
		// counters' latest versions, not its statement's snapshot.
		guard(wrong)
		locked, counted = read()
		done := make(chan struct{})
		var out Outcome
		var gerr error
		if err := s.DB.InTx(ctx, func(tx *db.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE login_failures SET failures = failures + 1, locked_until = ? WHERE subject = ?`,
				c.now().Add(time.Minute), a.pair()); err != nil {
				return err
			}
			go func() {
				defer close(done)
				out, gerr = s.Guard(ctx, a, locked, counted, right(6))
			}()
			if d == db.Postgres {
				// Commit once the record waits for the counter's row.
				waitForLockWait(t, s.DB, 1, "%guard_codes%")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		<-done
		if gerr != nil || out != Refused || step() != 5 {
			t.Fatalf("a right code while a concurrent count set a wait: %v, %v, step %d; want Refused, unrecorded", out, gerr, step())
		}

		// Concurrent wrong codes after the free failures: one is counted.
		c.add(time.Hour + time.Minute)
		for range PairFreeFailures - 1 {
			guard(wrong)
		}
		before := failures(a.pair())
		const n = 8
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := s.Guard(ctx, a, 0, 1, wrong); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := failures(a.pair()); got != before+1 {
			t.Fatalf("after %d concurrent wrong codes the pair counts %d; want %d (one counted, the rest refused during its wait)", n, got, before+1)
		}
	})
}

// waitForLockWait returns once n statements of d's database whose text
// is LIKE like wait for a lock (PostgreSQL).
func waitForLockWait(t *testing.T, d *db.DB, n int, like string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var got int
		if err := d.Get(context.Background(), &got, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE ?`, like); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
	}
	t.Fatalf("fewer than %d sessions waited for a lock within 10 s", n)
}

// The wait a count sets is the rule's: the ladder for the pair, one rung
// for the address and the account, from the first failure where the
// account's lock is one.
func TestCountSetsTheRulesWait(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		s, c := newStore(t, d)
		ctx := context.Background()
		lockedFor := func(subject string) time.Duration {
			t.Helper()
			var until sql.NullTime
			if err := s.DB.Get(ctx, &until, `SELECT locked_until FROM login_failures WHERE subject = ?`, subject); err != nil {
				t.Fatal(err)
			}
			if !until.Valid {
				return 0
			}
			return until.Time.Sub(c.now())
		}
		for _, r := range []struct {
			name string
			rule rule
		}{{"pair", pairRule}, {"address", addressRule}, {"account of 1", accountRule(1)}, {"account of 4", accountRule(4)}} {
			subject := "test:" + r.name
			for n := 1; n <= r.rule.from+len(r.rule.waits)+1; n++ {
				ok, err := count(ctx, s.DB, subject, "", r.rule, c.now())
				if err != nil || !ok {
					t.Fatalf("%s: the count of failure %d: %v, %v", r.name, n, ok, err)
				}
				if got, want := lockedFor(subject), r.rule.wait(n); got != want {
					t.Fatalf("%s: after failure %d: locked for %v; want %v", r.name, n, got, want)
				}
				if r.rule.wait(n) == 0 {
					continue
				}
				if ok, err := count(ctx, s.DB, subject, "", r.rule, c.now()); err != nil || ok {
					t.Fatalf("%s: a count during the wait of failure %d: counted %v, %v; want refused", r.name, n, ok, err)
				}
				if !r.rule.fresh {
					c.add(r.rule.wait(n))
				} else {
					break // a served wait starts afresh
				}
			}
		}
	})
}

// TestForgetAccountBesideARightCode: on PostgreSQL, an UnlockUser's
// forgetting of an account's counters and a right code's record of the
// same account lock the counters in one order, so neither can hold a
// counter the other waits for: with a third session holding the lower of
// the account's two counters, and the higher one stored first (where an
// unordered delete meets it first), both complete once it lets go, where
// locking in storage order ended in a deadlock.
func TestForgetAccountBesideARightCode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		if d != db.Postgres {
			t.Skip("SQLite writes one transaction at a time: no two statements hold locks at once")
		}
		s, c := newStore(t, d)
		ctx := context.Background()
		codeTable(t, s, "forget_codes")
		a := Attempt{Account: FactorAccount("u1"), Address: "192.0.2.1", MaxAccountFailures: 10}
		low, high := a.Account, a.pair()
		if high < low {
			low, high = high, low
		}
		// The higher counter first in storage, then the lower, then the
		// address's (no account: UnlockUser leaves it).
		for _, c2 := range []struct {
			subject string
			r       rule
		}{{high, pairRule}, {low, accountRule(10)}} {
			if ok, err := count(ctx, s.DB, c2.subject, a.Account, c2.r, c.now()); err != nil || !ok {
				t.Fatalf("count %s: %v, %v", c2.subject, ok, err)
			}
		}
		if ok, err := count(ctx, s.DB, a.address(), "", addressRule, c.now()); err != nil || !ok {
			t.Fatalf("count %s: %v, %v", a.address(), ok, err)
		}
		var (
			passed           Outcome
			passErr, unlkErr error
			wg               sync.WaitGroup
		)
		if err := s.DB.InTx(ctx, func(tx *db.Tx) error {
			var held string
			if err := tx.Get(ctx, &held, `SELECT subject FROM login_failures WHERE subject = ? FOR UPDATE`, low); err != nil {
				return err
			}
			wg.Go(func() {
				passed, passErr = a.pass(ctx, s.DB.Relaxed(), c.now(), true,
					`UPDATE forget_codes SET last_step = ? WHERE id = 'c1' AND last_step < ?`, []any{7, 7})
			})
			waitForLockWait(t, s.DB, 1, "%forget_codes%") // the record, at the lower counter
			wg.Go(func() {
				unlkErr = s.DB.InTx(ctx, func(tx *db.Tx) error { return ForgetAccount(ctx, tx, a.Account) })
			})
			waitForLockWait(t, s.DB, 2, "%login_failures%") // and the forgetting
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if passErr != nil || passed != Passed || unlkErr != nil {
			t.Fatalf("a right code's record beside an unlock: passed %v, %v; unlock: %v; want both done (no deadlock)", passed, passErr, unlkErr)
		}
		var left []string
		if err := s.DB.Select(ctx, &left, `SELECT subject FROM login_failures ORDER BY subject`); err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0] != a.address() {
			t.Fatalf("counters left: %v; want only the address's", left)
		}
	})
}

// codeTable makes table, a one-time code's record (a step that only
// grows), with the code c1 at step 0.
func codeTable(t *testing.T, s *Store, table string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.DB.Exec(ctx, `CREATE TABLE `+table+` (id TEXT PRIMARY KEY, last_step BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Exec(ctx, `INSERT INTO `+table+` (id, last_step) VALUES ('c1', 0)`); err != nil {
		t.Fatal(err)
	}
}
