package users_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

func factorSecrets(t *testing.T) users.FactorSecrets {
	t.Helper()
	c, err := secrets.NewCipher(bytes.Repeat([]byte{9}, 32), secrets.PurposeFactorSecrets)
	if err != nil {
		t.Fatal(err)
	}
	return users.FactorSecrets{Cipher: c}
}

func code(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkTOTP reads u's factor and checks code as a guess (TOTPGuess),
// running a right one's record as it is, without the lockout (guardTOTP
// adds it).
func checkTOTP(ctx context.Context, cmds *users.Commands, u *users.User, fs users.FactorSecrets, code string, now time.Time) error {
	q := cmds.Q.DB.Relaxed()
	r, err := users.GetForTOTP(ctx, q, u.ID, lockout.Attempt{Account: lockout.FactorAccount(u.ID)}, now)
	if err != nil {
		return err
	}
	update, args, err := cmds.TOTPGuess(r.Factor, fs, code, now)()
	if err != nil {
		return err
	}
	if update == "" {
		return users.ErrBadCode
	}
	res, err := q.Exec(ctx, update, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(err, users.ErrBadCode)
	}
	return nil
}

// guardTOTP checks code as the directory's factor check does: one read,
// then lockout.Store.Guard as attempt a.
func guardTOTP(ctx context.Context, cmds *users.Commands, u *users.User, fs users.FactorSecrets, code string, now time.Time, a lockout.Attempt) (lockout.Outcome, error) {
	r, err := users.GetForTOTP(ctx, cmds.Q.DB.Relaxed(), u.ID, a, now)
	if err != nil {
		return lockout.Refused, err
	}
	ls := &lockout.Store{DB: cmds.Q.DB, Now: func() time.Time { return now }}
	return ls.Guard(ctx, a, r.Locked, r.Counted, cmds.TOTPGuess(r.Factor, fs, code, now))
}

func TestTOTPLifecycle(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		u := f.human(t, "alice")
		now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

		if err := checkTOTP(ctx, f.cmds, u, fs, "123456", now); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("check without a generator: %v, want ErrBadCode", err)
		}
		reg, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		uri, err := url.Parse(reg.URI)
		if err != nil || uri.Scheme != "otpauth" || uri.Host != "totp" || uri.Query().Get("secret") != reg.Secret {
			t.Fatalf("uri %q, secret %q", reg.URI, reg.Secret)
		}
		if !strings.Contains(uri.Path, "alice@") || uri.Query().Get("issuer") != "Gatehouse" {
			t.Fatalf("uri %q names no account or issuer", reg.URI)
		}
		// The seed is sealed at rest, in the projection and in the event.
		var stored []byte
		if err := f.st.Get(ctx, &stored, `SELECT secret FROM user_factors WHERE user_id = ?`, u.ID); err != nil {
			t.Fatal(err)
		}
		evs, err := f.es.Events(ctx, eventstore.Filter{AggregateID: u.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if bytes.Contains(e.Payload, []byte(reg.Secret)) {
				t.Fatalf("event %s holds the seed in clear", e.Type)
			}
		}
		if bytes.Contains(stored, []byte(reg.Secret)) {
			t.Fatal("projection holds the seed in clear")
		}
		// Not ready: no login with it.
		u = f.reload(t, u)
		if err := checkTOTP(ctx, f.cmds, u, fs, code(t, reg.Secret, now), now); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("check before verification: %v", err)
		}
		if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, "000000", now); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("wrong verification code: %v", err)
		}
		if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, code(t, reg.Secret, now), now); err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		if _, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse"); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("second registration: %v", err)
		}
		// The code that verified the registration is spent; the next
		// step's code works once, then neither it nor an older one does.
		if err := checkTOTP(ctx, f.cmds, u, fs, code(t, reg.Secret, now), now); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("the verification's code again: %v", err)
		}
		later := now.Add(users.TOTPPeriod * time.Second)
		if err := checkTOTP(ctx, f.cmds, u, fs, code(t, reg.Secret, later), later); err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		if err := checkTOTP(ctx, f.cmds, u, fs, code(t, reg.Secret, later), later); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("replay in the same step: %v", err)
		}
		// Skew: the next step's code is accepted a step early.
		next := later.Add(users.TOTPPeriod * time.Second)
		if err := checkTOTP(ctx, f.cmds, u, fs, code(t, reg.Secret, next), later); err != nil {
			t.Fatalf("code of the next step: %v", err)
		}
		u = f.reload(t, u)
		far := next.Add(3 * users.TOTPPeriod * time.Second)
		if err := checkTOTP(ctx, f.cmds, u, fs, code(t, reg.Secret, far), next); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("code three steps ahead: %v", err)
		}

		// After a start that found the database not closed (StepFloor):
		// no code of the steps a lost record can be of, a code of the
		// step after them again.
		restart := far // no code of its steps was used
		floored := *f.cmds
		floored.StepFloor = users.StepFloorAfter(restart)
		for _, at := range []time.Time{restart.Add(-users.TOTPPeriod * time.Second), restart, restart.Add(users.TOTPPeriod * time.Second)} {
			if err := checkTOTP(ctx, &floored, u, fs, code(t, reg.Secret, at), restart); !errors.Is(err, users.ErrBadCode) {
				t.Fatalf("code of %v after a start at %v that was not clean: %v; want refused", at, restart, err)
			}
		}
		after := restart.Add(2 * users.TOTPPeriod * time.Second)
		if err := checkTOTP(ctx, &floored, u, fs, code(t, reg.Secret, after), after); err != nil {
			t.Fatalf("code two periods after a start that was not clean: %v", err)
		}

		fsOther := users.FactorSecrets{Cipher: mustCipher(t, 8)}
		if err := checkTOTP(ctx, f.cmds, u, fsOther, code(t, reg.Secret, far), far); err == nil || errors.Is(err, users.ErrBadCode) {
			t.Fatalf("another master key opened the seed: %v", err)
		}

		h, err := secrets.NewHasher(bytes.Repeat([]byte{5}, 32))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.cmds.GenerateRecoveryCodes(ctx, u.ID, u, h); err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.RemoveTOTP(ctx, "admin", u, true); err != nil {
			t.Fatal(err)
		}
		// The generator's recovery codes go with it.
		if n, err := f.q.RecoveryCodesLeft(ctx, u.ID); err != nil || n != 0 {
			t.Fatalf("recovery codes after the generator's removal: %d, %v", n, err)
		}
		u = f.reload(t, u)
		if u.SessionsNotBefore == nil {
			t.Fatal("an admin's removal did not end the user's sessions")
		}
		if _, err := f.cmds.RemoveTOTP(ctx, u.ID, u, false); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("second removal: %v", err)
		}
	})
}

func mustCipher(t *testing.T, b byte) *secrets.Cipher {
	t.Helper()
	c, err := secrets.NewCipher(bytes.Repeat([]byte{b}, 32), secrets.PurposeFactorSecrets)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withTOTP is a new human user name with a TOTP generator, verified at
// now, and the generator's secret.
func (f *linkFixture) withTOTP(t *testing.T, name string, fs users.FactorSecrets, now time.Time) (*users.User, string) {
	t.Helper()
	ctx := context.Background()
	u := f.human(t, name)
	reg, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse")
	if err != nil {
		t.Fatal(err)
	}
	u = f.reload(t, u)
	if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, code(t, reg.Secret, now), now); err != nil {
		t.Fatal(err)
	}
	return f.reload(t, u), reg.Secret
}

// Two logins racing with one code: exactly one is accepted, and no loser
// reads as a lock's refusal (the throttled metric): each lost the race
// (Lost) or read the winner's record (Wrong: three losers stay within the
// pair's lockout.PairFreeFailures, so none is refused by a wait).
func TestTOTPRaceOneWinner(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		u, secret := f.withTOTP(t, "bob", fs, now)
		later := now.Add(time.Minute)
		c := code(t, secret, later)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				var out lockout.Outcome
				out, errs[i] = guardTOTP(ctx, f.cmds, u, fs, c, later, lockout.Attempt{Account: lockout.FactorAccount(u.ID), Address: "192.0.2.4"})
				switch {
				case errs[i] != nil:
				case out == lockout.Refused:
					errs[i] = errors.New("a loser refused as if a lock held")
				case out != lockout.Passed:
					errs[i] = users.ErrBadCode
				}
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, users.ErrBadCode):
				t.Fatalf("unexpected error: %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d checks accepted one code, want 1", ok)
		}
	})
}

// Through the lockout: a wrong code counts, a right one forgets the
// attempt's pair and account counts (on PostgreSQL in the statement that
// records its step) and keeps the address's, and a code whose record lost
// a race (read before the winner recorded it) is refused as Lost, not as
// a lock's refusal, and forgets nothing.
func TestTOTPCheckForgetsCounts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		u, secret := f.withTOTP(t, "dave", fs, now)
		a := lockout.Attempt{Account: lockout.FactorAccount(u.ID), Address: "192.0.2.9", MaxAccountFailures: 5}
		counts := func() (pairAndAccount, address int) {
			t.Helper()
			if err := f.st.Get(ctx, &pairAndAccount, `SELECT COUNT(*) FROM login_failures WHERE account = ?`, a.Account); err != nil {
				t.Fatal(err)
			}
			if err := f.st.Get(ctx, &address, `SELECT COUNT(*) FROM login_failures WHERE subject LIKE 'addr:%'`); err != nil {
				t.Fatal(err)
			}
			return pairAndAccount, address
		}
		later := now.Add(time.Minute)
		wrong := "000000"
		for i := 1; slices.Contains([]string{code(t, secret, later.Add(-30*time.Second)), code(t, secret, later),
			code(t, secret, later.Add(30*time.Second))}, wrong); i++ {
			wrong = fmt.Sprintf("%06d", i)
		}
		if out, err := guardTOTP(ctx, f.cmds, u, fs, wrong, later, a); err != nil || out != lockout.Wrong {
			t.Fatalf("a wrong code: %v, %v; want Wrong", out, err)
		}
		if pa, ad := counts(); pa != 2 || ad != 1 {
			t.Fatalf("after a wrong code: %d pair and account counters, %d address; want 2, 1", pa, ad)
		}
		r, err := users.GetForTOTP(ctx, f.st.Relaxed(), u.ID, a, later)
		if err != nil || r.Counted != 2 || r.Locked != 0 {
			t.Fatalf("the read: counted %d, locked %d, %v; want 2, 0", r.Counted, r.Locked, err)
		}
		if out, err := guardTOTP(ctx, f.cmds, u, fs, code(t, secret, later), later, a); err != nil || out != lockout.Passed {
			t.Fatalf("a right code: %v, %v; want Passed", out, err)
		}
		if pa, ad := counts(); pa != 0 || ad != 1 {
			t.Fatalf("after a right code: %d pair and account counters, %d address; want 0, 1", pa, ad)
		}
		// The factor as read before that check: its step is not yet the
		// code's, so only the record's conditional update refuses it.
		guardTOTP(ctx, f.cmds, u, fs, wrong, later, a)
		ls := &lockout.Store{DB: f.st, Now: func() time.Time { return later }}
		out, err := ls.Guard(ctx, a, 0, 2, f.cmds.TOTPGuess(r.Factor, fs, code(t, secret, later), later))
		if pa, ad := counts(); err != nil || out != lockout.Lost || pa != 2 || ad != 1 {
			t.Fatalf("the code again, from the race's loser: %v, %v, %d pair and account counters, %d address; want Lost, 2, 1",
				out, err, pa, ad)
		}
	})
}

func TestRecoveryCodes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		h, err := secrets.NewHasher(bytes.Repeat([]byte{5}, 32))
		if err != nil {
			t.Fatal(err)
		}
		u := f.human(t, "carol")
		codes, _, err := f.cmds.GenerateRecoveryCodes(ctx, u.ID, u, h)
		if err != nil {
			t.Fatal(err)
		}
		if len(codes) != users.RecoveryCodeCount {
			t.Fatalf("%d codes", len(codes))
		}
		seen := map[string]bool{}
		for _, c := range codes {
			if len(c) != 11 || c[5] != '-' || seen[c] {
				t.Fatalf("code %q (dup %v)", c, seen[c])
			}
			seen[c] = true
		}
		u = f.reload(t, u)
		if _, err := f.cmds.UseRecoveryCode(ctx, u, h, "bbbbb-bbbbb"); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("wrong code: %v", err)
		}
		// Typed in capitals with spaces: still the code.
		left, err := f.cmds.UseRecoveryCode(ctx, u, h, " "+strings.ToUpper(strings.ReplaceAll(codes[3], "-", " "))+" ")
		if err != nil || left != users.RecoveryCodeCount-1 {
			t.Fatalf("use: left %d, %v", left, err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.UseRecoveryCode(ctx, u, h, codes[3]); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("second use: %v", err)
		}
		if n, err := f.q.RecoveryCodesLeft(ctx, u.ID); err != nil || n != users.RecoveryCodeCount-1 {
			t.Fatalf("left %d, %v", n, err)
		}
		// Regenerating replaces every code.
		fresh, _, err := f.cmds.GenerateRecoveryCodes(ctx, u.ID, u, h)
		if err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.UseRecoveryCode(ctx, u, h, codes[0]); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("an old code after regenerating: %v", err)
		}
		if _, err := f.cmds.UseRecoveryCode(ctx, u, h, fresh[0]); err != nil {
			t.Fatal(err)
		}
	})
}

// A login's enrollment resumes the user's own unfinished registration,
// never one an admin started (the admin was shown its secret).
func TestResumeTOTP(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		u := f.human(t, "dave")
		byAdmin, _, err := f.cmds.StartTOTP(ctx, "admin", u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		own, err := f.cmds.ResumeTOTP(ctx, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		if own.Secret == byAdmin.Secret {
			t.Fatal("the login's enrollment resumed the registration an admin started")
		}
		u = f.reload(t, u)
		again, err := f.cmds.ResumeTOTP(ctx, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		if again.Secret != own.Secret || again.URI != own.URI {
			t.Fatalf("resumed %q, want the user's own %q", again.URI, own.URI)
		}
	})
}

// What a password check learns of a user's second factors: the ready
// ones' types, once each, oldest first; passkeys (a first factor) and
// unfinished registrations are not among them.
func TestSecondFactorTypes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		u, other := f.human(t, "alice"), f.human(t, "bob")
		if got, err := f.q.SecondFactorTypes(ctx, u.ID); err != nil || len(got) != 0 {
			t.Fatalf("no factors: %v, %v", got, err)
		}
		at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		for i, r := range []struct {
			user, typ string
			state     int32
		}{
			{u.ID, users.FactorPasswordless, users.FactorReady},
			{u.ID, users.FactorU2F, users.FactorNotReady},
			{u.ID, users.FactorU2F, users.FactorReady},
			{u.ID, users.FactorOTP, users.FactorReady},
			{u.ID, users.FactorU2F, users.FactorReady},
			{other.ID, users.FactorOTP, users.FactorReady},
		} {
			if _, err := f.st.Exec(ctx, `INSERT INTO user_factors (id, user_id, org_id, type, state, creation_date, change_date, sequence)
				VALUES (?, ?, ?, ?, ?, ?, ?, 1)`, fmt.Sprintf("f%d", i), r.user, u.OrgID, r.typ, r.state, at.Add(time.Duration(i)*time.Minute), at); err != nil {
				t.Fatal(err)
			}
		}
		got, err := f.q.SecondFactorTypes(ctx, u.ID)
		if err != nil || !slices.Equal(got, []string{users.FactorU2F, users.FactorOTP}) {
			t.Fatalf("SecondFactorTypes = %v, %v; want [u2f otp]", got, err)
		}
	})
}

// A code's check reads the user, its organization's lock, its TOTP
// factor and the attempt's locks in one statement: no factor, an
// unverified one, a ready one; the account's lock counts only where the
// organization opts in.
func TestGetForTOTP(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		u := f.human(t, "carol")
		now := time.Now()
		a := lockout.Attempt{Account: lockout.FactorAccount(u.ID), Address: "192.0.2.7"}
		if _, err := users.GetForTOTP(ctx, f.st, "nobody", a, now); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("unknown user: %v", err)
		}
		r, err := users.GetForTOTP(ctx, f.st, u.ID, a, now)
		if err != nil || r.User.ID != u.ID || r.User.UserName != u.UserName || r.MaxFailures != 0 || r.Factor != nil || r.Locked != 0 || r.Counted != 0 {
			t.Fatalf("no factor: %+v, %v", r, err)
		}
		// The account locked from another address (an organization's
		// lock of one failure, since turned off) does not count.
		ls := &lockout.Store{DB: f.st, Now: func() time.Time { return now }}
		if ok, err := ls.Begin(ctx, lockout.Attempt{Account: a.Account, Address: "198.51.100.1", MaxAccountFailures: 1}); err != nil || !ok {
			t.Fatalf("Begin: %v, %v", ok, err)
		}
		if r, err := users.GetForTOTP(ctx, f.st, u.ID, a, now); err != nil || r.Locked != 0 || r.Counted != 1 {
			t.Fatalf("the account locked, the organization's lock off: %+v, %v; want locked 0 (and the account's counter)", r, err)
		}
		if _, err := f.st.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 7 WHERE id = ?`, u.OrgID); err != nil {
			t.Fatal(err)
		}
		if r, err := users.GetForTOTP(ctx, f.st, u.ID, a, now); err != nil || r.Locked != 1 {
			t.Fatalf("the account locked, the organization's lock on: locked %d, %v; want 1", r.Locked, err)
		}
		// The pair's wait counts without the account's lock.
		for range lockout.PairFreeFailures {
			if ok, err := ls.Begin(ctx, lockout.Attempt{Account: a.Account, Address: a.Address}); err != nil || !ok {
				t.Fatalf("Begin: %v, %v", ok, err)
			}
		}
		if _, err := f.st.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 0 WHERE id = ?`, u.OrgID); err != nil {
			t.Fatal(err)
		}
		if r, err := users.GetForTOTP(ctx, f.st, u.ID, a, now); err != nil || r.Locked != 1 || r.Counted != 2 {
			t.Fatalf("the pair waiting: locked %d, counted %d, %v; want 1, 2 (the pair's and the account's counters)", r.Locked, r.Counted, err)
		}
		if r, err := users.GetForTOTP(ctx, f.st, u.ID, a, now.Add(lockout.AccountLockTime)); err != nil || r.Locked != 0 {
			t.Fatalf("after the waits: locked %d, %v; want 0", r.Locked, err)
		}
		if _, err := f.st.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 7 WHERE id = ?`, u.OrgID); err != nil {
			t.Fatal(err)
		}

		reg, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		r, err = users.GetForTOTP(ctx, f.st, u.ID, a, now)
		if err != nil || r.MaxFailures != 7 || r.Factor == nil || r.Factor.Ready() || r.Factor.UserID != u.ID {
			t.Fatalf("unverified: %d, %+v, %v", r.MaxFailures, r.Factor, err)
		}
		if update, _, err := f.cmds.TOTPGuess(r.Factor, fs, code(t, reg.Secret, now), now)(); update != "" || err != nil {
			t.Fatalf("an unverified factor's code: %q, %v; want a wrong guess", update, err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, code(t, reg.Secret, now.Add(-30*time.Second)), now); err != nil {
			t.Fatal(err)
		}
		r, err = users.GetForTOTP(ctx, f.st, u.ID, a, now)
		if err != nil || r.Factor == nil || !r.Factor.Ready() {
			t.Fatalf("verified: %+v, %v", r.Factor, err)
		}
		// The seed opens (the sealing names the user and the factor).
		if update, _, err := f.cmds.TOTPGuess(r.Factor, fs, code(t, reg.Secret, now), now)(); update == "" || err != nil {
			t.Fatalf("the current code: %q, %v; want a right guess", update, err)
		}
	})
}
