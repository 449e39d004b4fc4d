package internalapi

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// TestEveryRefusalCostsOneHash: the time of an answer must not tell an
// unknown name, a wrong password and an attempt refused by the limits
// apart, so each verifies exactly one password hash: the user's for a
// wrong password, the dummy one otherwise; a refused attempt never reaches
// the user's hash, even with the right password. A fake clock makes the
// limits exact; a new Server over the same store is a restart.
func TestEveryRefusalCostsOneHash(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		es := eventstore.New(storetest.Open(t, d), clock)
		projections.RegisterAll(es)
		orgID, _, err := (&orgs.Commands{ES: es, IssuerHost: "localhost"}).AddOrg(ctx, "test", "Acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		org, err := (&orgs.Queries{DB: es.DB()}).Get(ctx, orgID)
		if err != nil {
			t.Fatal(err)
		}
		const pw = "Corr3ct-Horse"
		hash, err := secrets.HashPassword(ctx, pw)
		if err != nil {
			t.Fatal(err)
		}
		userID, _, err := (&users.Commands{ES: es, Q: &users.Queries{DB: es.DB()}}).AddHuman(ctx, "test", org, users.HumanAdded{
			UserName: "ada", FirstName: "Ada", LastName: "L", DisplayName: "Ada L", PasswordHash: hash})
		if err != nil {
			t.Fatal(err)
		}
		cipher, err := secrets.NewCipher(bytes.Repeat([]byte{7}, 32), secrets.PurposeIdPSecrets)
		if err != nil {
			t.Fatal(err)
		}
		var hashes []string
		start := func() *Server {
			s, err := New(es, logging.Discard(), clock, cipher)
			if err != nil {
				t.Fatal(err)
			}
			s.verify = func(ctx context.Context, password, encoded string) (bool, bool, error) {
				hashes = append(hashes, encoded)
				return secrets.VerifyPassword(ctx, password, encoded)
			}
			return s
		}
		s := start()
		try := func(login, password string) (string, error) {
			t.Helper()
			hashes = nil
			_, err := s.VerifyPassword(ctx, &directoryv1.VerifyPasswordRequest{
				OrgId: orgID, LoginName: login, Password: password, ClientAddress: "192.0.2.7"})
			if len(hashes) != 1 {
				t.Fatalf("%s: %d hashes verified; want exactly 1", login, len(hashes))
			}
			return hashes[0], err
		}
		want := func(what string, err error) {
			t.Helper()
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated || ce.Message() != errBadCredentials.Error() {
				t.Fatalf("%s: %v; want Unauthenticated %q", what, err, errBadCredentials)
			}
		}
		for range lockout.PairFreeFailures {
			h, err := try("ada", "wrong")
			want("wrong password", err)
			if h != hash {
				t.Fatal("wrong password: not verified against the user's hash")
			}
			h, err = try("nobody", "wrong")
			want("unknown name", err)
			if h == hash {
				t.Fatal("unknown name: verified against a user's hash")
			}
		}
		s = start() // the counters are in the store
		for _, login := range []string{"ada", "nobody"} {
			h, err := try(login, pw)
			want(login+", right password, too early", err)
			if h == hash {
				t.Fatalf("%s too early: verified against the user's hash", login)
			}
		}
		now = now.Add(lockout.PairDelay(lockout.PairFreeFailures))
		if h, err := try("ada", pw); err != nil || h != hash {
			t.Fatalf("right password after the wait: %v", err)
		}
		var rows int
		if err := es.DB().Get(ctx, &rows, `SELECT COUNT(*) FROM login_failures WHERE account = ?`, lockout.UserAccount(userID)); err != nil || rows != 0 {
			t.Fatalf("ada's counters after her login: %d rows, %v; want none", rows, err)
		}
	})
}
