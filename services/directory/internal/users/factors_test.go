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

// checkTOTP reads u's factor and checks code, as the directory's factor
// check does.
func checkTOTP(ctx context.Context, cmds *users.Commands, u *users.User, fs users.FactorSecrets, code string, now time.Time) error {
	q := cmds.Q.DB.Relaxed()
	_, _, f, _, err := users.GetForTOTP(ctx, q, u.ID, lockout.Attempt{Account: lockout.FactorAccount(u.ID)}, now)
	if err != nil {
		return err
	}
	return cmds.CheckTOTPFactor(ctx, q, f, fs, code, now, lockout.Attempt{Account: lockout.FactorAccount(u.ID)})
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

// Two logins racing with one code: exactly one is accepted.
func TestTOTPRaceOneWinner(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		u := f.human(t, "bob")
		now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		reg, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, code(t, reg.Secret, now), now); err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		later := now.Add(time.Minute)
		c := code(t, reg.Secret, later)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = checkTOTP(ctx, f.cmds, u, fs, c, later) })
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

// A right code forgets the attempt's pair and account counts (on
// PostgreSQL in the statement that records its step); a code whose
// update matches no row (it lost a race) forgets nothing, and a wrong
// code forgets nothing.
func TestTOTPCheckForgetsCounts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		fs := factorSecrets(t)
		u := f.human(t, "dave")
		now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		reg, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, code(t, reg.Secret, now), now); err != nil {
			t.Fatal(err)
		}
		a := lockout.Attempt{Account: lockout.FactorAccount(u.ID), Address: "192.0.2.9", MaxAccountFailures: 5}
		ls := &lockout.Store{DB: f.st, Now: func() time.Time { return now }}
		q := f.st.Relaxed()
		counted := func() int {
			t.Helper()
			if ok, err := ls.Begin(ctx, a); err != nil || !ok {
				t.Fatalf("Begin: %v, %v", ok, err)
			}
			var n int
			if err := f.st.Get(ctx, &n, `SELECT COUNT(*) FROM login_failures WHERE account = ? AND failures > 0`, a.Account); err != nil {
				t.Fatal(err)
			}
			return n
		}
		left := func() int {
			t.Helper()
			var n int
			if err := f.st.Get(ctx, &n, `SELECT COUNT(*) FROM login_failures WHERE account = ?`, a.Account); err != nil {
				t.Fatal(err)
			}
			return n
		}
		later := now.Add(time.Minute)
		_, _, stale, _, err := users.GetForTOTP(ctx, q, u.ID, a, later)
		if err != nil {
			t.Fatal(err)
		}
		if n := counted(); n != 2 {
			t.Fatalf("%d counts before the check; want the pair's and the account's", n)
		}
		wrong := "000000"
		for i := 1; slices.Contains([]string{code(t, reg.Secret, later.Add(-30*time.Second)), code(t, reg.Secret, later),
			code(t, reg.Secret, later.Add(30*time.Second))}, wrong); i++ {
			wrong = fmt.Sprintf("%06d", i)
		}
		if err := f.cmds.CheckTOTPFactor(ctx, q, stale, fs, wrong, later, a); !errors.Is(err, users.ErrBadCode) || left() != 2 {
			t.Fatalf("a wrong code: %v, %d counts left; want ErrBadCode and 2", err, left())
		}
		if err := f.cmds.CheckTOTPFactor(ctx, q, stale, fs, code(t, reg.Secret, later), later, a); err != nil || left() != 0 {
			t.Fatalf("a right code: %v, %d counts left; want nil and 0", err, left())
		}
		// The factor as read before that check: its step is not yet the
		// code's, so only the conditional update refuses the code again.
		counted()
		if err := f.cmds.CheckTOTPFactor(ctx, q, stale, fs, code(t, reg.Secret, later), later, a); !errors.Is(err, users.ErrBadCode) || left() != 2 {
			t.Fatalf("the code again, from the race's loser: %v, %d counts left; want ErrBadCode and 2", err, left())
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
		if _, _, _, _, err := users.GetForTOTP(ctx, f.st, "nobody", a, now); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("unknown user: %v", err)
		}
		got, lock, factor, locked, err := users.GetForTOTP(ctx, f.st, u.ID, a, now)
		if err != nil || got.ID != u.ID || got.UserName != u.UserName || lock != 0 || factor != nil || locked != 0 {
			t.Fatalf("no factor: %+v, %d, %+v, locked %d, %v", got, lock, factor, locked, err)
		}
		// The account locked from another address (an organization's
		// lock of one failure, since turned off) does not count.
		ls := &lockout.Store{DB: f.st, Now: func() time.Time { return now }}
		if ok, err := ls.Begin(ctx, lockout.Attempt{Account: a.Account, Address: "198.51.100.1", MaxAccountFailures: 1}); err != nil || !ok {
			t.Fatalf("Begin: %v, %v", ok, err)
		}
		if _, _, _, locked, err := users.GetForTOTP(ctx, f.st, u.ID, a, now); err != nil || locked != 0 {
			t.Fatalf("the account locked, the organization's lock off: locked %d, %v; want 0", locked, err)
		}
		if _, err := f.st.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 7 WHERE id = ?`, u.OrgID); err != nil {
			t.Fatal(err)
		}
		if _, _, _, locked, err := users.GetForTOTP(ctx, f.st, u.ID, a, now); err != nil || locked != 1 {
			t.Fatalf("the account locked, the organization's lock on: locked %d, %v; want 1", locked, err)
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
		if _, _, _, locked, err := users.GetForTOTP(ctx, f.st, u.ID, a, now); err != nil || locked != 1 {
			t.Fatalf("the pair waiting: locked %d, %v; want 1", locked, err)
		}
		if _, _, _, locked, err := users.GetForTOTP(ctx, f.st, u.ID, a, now.Add(lockout.AccountLockTime)); err != nil || locked != 0 {
			t.Fatalf("after the waits: locked %d, %v; want 0", locked, err)
		}
		if _, err := f.st.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 7 WHERE id = ?`, u.OrgID); err != nil {
			t.Fatal(err)
		}

		reg, _, err := f.cmds.StartTOTP(ctx, u.ID, u, fs, "Gatehouse")
		if err != nil {
			t.Fatal(err)
		}
		_, lock, factor, _, err = users.GetForTOTP(ctx, f.st, u.ID, a, now)
		if err != nil || lock != 7 || factor == nil || factor.Ready() || factor.UserID != u.ID {
			t.Fatalf("unverified: %d, %+v, %v", lock, factor, err)
		}
		if err := f.cmds.CheckTOTPFactor(ctx, f.st, factor, fs, code(t, reg.Secret, now), now, a); !errors.Is(err, users.ErrBadCode) {
			t.Fatalf("an unverified factor's code: %v; want ErrBadCode", err)
		}
		u = f.reload(t, u)
		if _, err := f.cmds.VerifyTOTP(ctx, u.ID, u, fs, code(t, reg.Secret, now.Add(-30*time.Second)), now); err != nil {
			t.Fatal(err)
		}
		_, _, factor, _, err = users.GetForTOTP(ctx, f.st, u.ID, a, now)
		if err != nil || factor == nil || !factor.Ready() {
			t.Fatalf("verified: %+v, %v", factor, err)
		}
		// The seed opens (the sealing names the user and the factor).
		if err := f.cmds.CheckTOTPFactor(ctx, f.st, factor, fs, code(t, reg.Secret, now), now, a); err != nil {
			t.Fatalf("the current code: %v", err)
		}
	})
}
