package internalapi_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// A login's second factor: enrollment, a code accepted once, a wrong code
// and a replay answered alike, and wrong codes counting toward a delay
// that a correct password does not reset.
func TestCheckAuthFactor(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		c := e.Internal(mgmttest.InternalToken)
		if r := e.REST("POST", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
			"allowUsernamePassword": true, "allowRegister": true, "forceMfa": true, "secondFactors": []string{"SECOND_FACTOR_TYPE_OTP"}}); r.Status != 200 {
			t.Fatalf("AddCustomLoginPolicy: %d %s", r.Status, r.Body)
		}
		org, err := c.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: e.OrgID})
		if err != nil {
			t.Fatal(err)
		}
		if lp := org.GetLoginPolicy(); !lp.GetForceMfa() || len(lp.GetSecondFactors()) != 1 || lp.GetSecondFactors()[0] != "otp" {
			t.Fatalf("login policy %v", lp)
		}
		u := register(t, c, e.OrgID, "mfa", "mfa@example.com")
		check := func(typ, code, addr string) error {
			_, err := c.CheckAuthFactor(ctx, &directoryv1.CheckAuthFactorRequest{OrgId: e.OrgID, UserId: u.GetId(), Type: typ, Code: code, ClientAddress: addr})
			return err
		}
		if err := check("otp", "123456", "192.0.2.1"); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("no generator yet: %v", err)
		}
		if err := check("sms", "123456", "192.0.2.1"); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("unknown type: %v", err)
		}
		// Who the code is checked for, read in the check's transaction:
		// nobody, another organization's user, a machine, a deactivated
		// user. None is counted against the address.
		machine := e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", map[string]any{"userName": "mfa-bot", "name": "bot"})
		if machine.Status != 200 {
			t.Fatalf("AddMachineUser: %d %s", machine.Status, machine.Body)
		}
		gone := register(t, c, e.OrgID, "mfa-gone", "gone@example.com")
		restOK(t, e, "POST", "/management/v1/users/"+gone.GetId()+"/_deactivate", "", map[string]any{})
		for _, tc := range []struct {
			org, user string
			want      connect.Code
		}{
			{e.OrgID, "", connect.CodeInvalidArgument},
			{e.OrgID, "no-such-user", connect.CodeNotFound},
			{"another-org", u.GetId(), connect.CodeNotFound},
			{e.OrgID, machine.JSON["userId"].(string), connect.CodeNotFound},
			{e.OrgID, gone.GetId(), connect.CodeFailedPrecondition},
		} {
			_, err := c.CheckAuthFactor(ctx, &directoryv1.CheckAuthFactorRequest{OrgId: tc.org, UserId: tc.user, Type: "otp", Code: "123456", ClientAddress: "192.0.2.9"})
			if connect.CodeOf(err) != tc.want {
				t.Errorf("code for user %q of %q: %v; want %v", tc.user, tc.org, err, tc.want)
			}
		}
		var counted int
		if err := e.DB.Get(ctx, &counted, `SELECT COUNT(*) FROM login_failures WHERE subject LIKE ?`, `%192.0.2.9%`); err != nil || counted != 0 {
			t.Fatalf("counters after checks for no one: %d, %v; want none", counted, err)
		}
		reg, err := c.StartTOTP(ctx, &directoryv1.StartTOTPRequest{UserId: u.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		code, _ := totp.GenerateCode(reg.GetSecret(), now)
		// A registration not yet verified is no factor.
		if err := check("otp", code, "192.0.2.8"); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("the code of an unverified registration: %v", err)
		}
		if _, err := c.VerifyTOTP(ctx, &directoryv1.VerifyTOTPRequest{UserId: u.GetId(), Code: code}); err != nil {
			t.Fatal(err)
		}
		fs, err := c.ListAuthFactors(ctx, &directoryv1.ListAuthFactorsRequest{UserId: u.GetId()})
		if err != nil || len(fs.GetSecondFactors()) != 1 || fs.GetSecondFactors()[0] != "otp" {
			t.Fatalf("factors %v, %v", fs, err)
		}
		// The enrollment's code is spent: the same answer as a wrong one.
		wrong := check("otp", "000000", "192.0.2.1")
		replay := check("otp", code, "192.0.2.1")
		if connect.CodeOf(wrong) != connect.CodeUnauthenticated || connect.CodeOf(replay) != connect.CodeUnauthenticated ||
			wrong.Error() != replay.Error() {
			t.Fatalf("wrong %v, replay %v: want one answer", wrong, replay)
		}
		// Wrong codes past the free ones delay the pair, whatever the
		// password does in between.
		for range lockout.PairFreeFailures {
			_ = check("otp", "000000", "192.0.2.2")
			if _, err := verify(c, e.OrgID, "mfa", pw, "192.0.2.2"); err != nil {
				t.Fatalf("password: %v", err)
			}
		}
		next, _ := totp.GenerateCode(reg.GetSecret(), now.Add(30*time.Second))
		if err := check("otp", next, "192.0.2.2"); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("a right code while delayed: %v", err)
		}
		// Another address is not delayed by them.
		if err := check("otp", next, "192.0.2.3"); err != nil {
			t.Fatalf("a right code from another address: %v", err)
		}
		// The accepted code forgot the pair's count, which Begin took in
		// advance (in the transaction that recorded the code's step).
		var n int
		if err := e.DB.Get(ctx, &n, `SELECT COUNT(*) FROM login_failures WHERE subject LIKE ?`, `pair:"192.0.2.3":%`); err != nil || n != 0 {
			t.Fatalf("counters of the address after an accepted code: %d, %v; want none", n, err)
		}
		if err := e.DB.Get(ctx, &n, `SELECT COUNT(*) FROM login_failures WHERE subject LIKE ?`, `pair:"192.0.2.2":%`); err != nil || n == 0 {
			t.Fatalf("counters of the delayed address: %d, %v; want its pair", n, err)
		}
	})
}

// A start after a process that did not close its SQLite data refuses the
// authenticator codes of the current steps: the record of a code accepted
// just before the stop may be lost with a crash of the machine. A clean
// restart refuses none.
func TestUncleanStartRefusesRecentCodes(t *testing.T) {
	t.Parallel()
	e := mgmttest.Start(t, db.SQLite)
	ctx := context.Background()
	c := e.Internal(mgmttest.InternalToken)
	userID := e.SeedUser(e.OrgID, "crash")
	secret := enrollTOTP(t, c, userID)
	check := func(c directoryv1connect.DirectoryServiceClient, code string) error {
		_, err := c.CheckAuthFactor(ctx, &directoryv1.CheckAuthFactorRequest{OrgId: e.OrgID, UserId: userID, Type: "otp", Code: code, ClientAddress: "192.0.2.7"})
		return err
	}
	e.RestartUnclean()
	c = e.Internal(mgmttest.InternalToken)
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(30 * time.Second)} {
		if err := check(c, mustCode(t, secret, at)); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("code of %v after an unclean start: %v; want refused", at, err)
		}
	}
	e.Restart()
	c = e.Internal(mgmttest.InternalToken)
	if err := check(c, mustCode(t, secret, time.Now())); err != nil {
		t.Fatalf("the current code after a clean restart: %v", err)
	}
}

// enrollTOTP gives userID a TOTP generator, verified with the code of the
// step before, so that the codes of the current steps are unused, and
// returns its secret.
func enrollTOTP(t *testing.T, c directoryv1connect.DirectoryServiceClient, userID string) string {
	t.Helper()
	ctx := context.Background()
	reg, err := c.StartTOTP(ctx, &directoryv1.StartTOTPRequest{UserId: userID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.VerifyTOTP(ctx, &directoryv1.VerifyTOTPRequest{UserId: userID,
		Code: mustCode(t, reg.GetSecret(), time.Now().Add(-30*time.Second))}); err != nil {
		t.Fatal(err)
	}
	return reg.GetSecret()
}

func mustCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// Concurrent wrong codes for one user share no slot: each is counted
// before its answer, by an upsert that sets the wait it earns and that a
// concurrent one's waits for and then sees (lockout.Store.Guard), so one
// is counted and every other one is refused uncounted, as is the right
// code after them.
func TestConcurrentCodesShareNoSlot(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		c := e.Internal(mgmttest.InternalToken)
		userID := e.SeedUser(e.OrgID, "racer")
		secret := enrollTOTP(t, c, userID)
		// The pair has used its free failures and served its wait: the
		// next failure starts a wait of 16 s, longer than the race.
		const addr = "192.0.2.50"
		pair := "pair:" + strconv.Quote(addr) + ":" + lockout.FactorAccount(userID)
		const before = lockout.PairFreeFailures + 3
		check := func(code string) error {
			_, err := c.CheckAuthFactor(ctx, &directoryv1.CheckAuthFactorRequest{OrgId: e.OrgID, UserId: userID, Type: "otp",
				Code: code, ClientAddress: addr})
			return err
		}
		if _, err := e.DB.Exec(ctx, `INSERT INTO login_failures (subject, account, failures, updated_at) VALUES (?, ?, ?, ?)`,
			pair, lockout.FactorAccount(userID), before, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = check("000000")
			})
		}
		wg.Wait()
		for _, err := range errs {
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("a concurrent wrong code: %v", err)
			}
		}
		var failures int
		if err := e.DB.Get(ctx, &failures, `SELECT COALESCE(MAX(failures), 0) FROM login_failures WHERE subject = ?`, pair); err != nil {
			t.Fatal(err)
		}
		if failures != before+1 {
			t.Fatalf("after %d concurrent wrong codes the pair counts %d failures; want %d (one counted, the rest refused during its wait)",
				n, failures, before+1)
		}
		if err := check(mustCode(t, secret, time.Now())); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("the right code during the wait: %v; want refused", err)
		}
	})
}
