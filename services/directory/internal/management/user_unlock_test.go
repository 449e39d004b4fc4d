package management_test

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// TestUnlockUser: UnlockUser lifts the user's delays and account lock at
// once (the password check of the internal API lets the user in), only
// that user's, and is recorded as an event; users it cannot see are
// NotFound.
func TestUnlockUser(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		internal := e.Internal(mgmttest.InternalToken)
		// The organization opts in to the account lock, so both limits
		// are in force.
		if _, err := e.DB.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 5 WHERE id = ?`, e.OrgID); err != nil {
			t.Fatal(err)
		}
		const pw = "Unlock-Passw0rd"
		add := func(name string) string {
			r := e.REST("POST", "/management/v1/users/human/_import", e.AdminToken, "", map[string]any{
				"userName": name, "profile": map[string]any{"firstName": name, "lastName": "U"},
				"email": map[string]any{"email": name + "@example.com"}, "password": pw})
			if r.Status != 200 {
				t.Fatalf("ImportHumanUser %s: %d %s", name, r.Status, r.Body)
			}
			return r.JSON["userId"].(string)
		}
		verify := func(name, password, addr string) error {
			_, err := internal.VerifyPassword(ctx, &directoryv1.VerifyPasswordRequest{
				OrgId: e.OrgID, LoginName: name, Password: password, ClientAddress: addr})
			return err
		}
		ulla, bert := add("ulla"), add("bert")
		for i := range 5 {
			for _, name := range []string{"ulla", "bert"} {
				if err := verify(name, "wrong", fmt.Sprintf("192.0.2.%d", i%2)); connect.CodeOf(err) != connect.CodeUnauthenticated {
					t.Fatalf("wrong password of %s: %v", name, err)
				}
			}
		}
		if err := verify("ulla", pw, "192.0.2.9"); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("locked ulla's password: %v; want refused", err)
		}

		for i, p := range mgmttest.Protocols {
			c := e.Client(p, e.AdminToken, "")
			res, err := c.UnlockUser(ctx, &managementv1.UnlockUserRequest{Id: ulla})
			if err != nil {
				t.Fatalf("UnlockUser over %s: %v", p, err)
			}
			ev := usrLast(t, e, ulla)
			if ev.Type != users.EventUnlocked {
				t.Fatalf("event %s; want %s", ev.Type, users.EventUnlocked)
			}
			usrWantWrite(t, "unlock over "+p, res.GetDetails(), ev)
			if i > 0 {
				continue // nothing left to lift: still recorded
			}
			for _, addr := range []string{"192.0.2.0", "192.0.2.1", "192.0.2.9"} {
				if err := verify("ulla", pw, addr); err != nil {
					t.Fatalf("ulla from %s right after the unlock: %v", addr, err)
				}
			}
			if err := verify("bert", pw, "192.0.2.9"); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("bert after ulla's unlock: %v; want still locked", err)
			}
		}
		r := e.REST("POST", "/management/v1/users/"+bert+"/_unlock", e.AdminToken, "", map[string]any{})
		if r.Status != 200 {
			t.Fatalf("UnlockUser over REST: %d %s", r.Status, r.Body)
		}
		usrWantWriteJSON(t, "unlock over REST", r, usrLast(t, e, bert))
		if err := verify("bert", pw, "192.0.2.9"); err != nil {
			t.Fatalf("bert after his unlock: %v", err)
		}

		otherOrg, _ := e.SeedOrg("Other Unlock Org", "owner-u")
		stranger := e.SeedUser(otherOrg, "stranger")
		usrRefused(t, e, "unknown user", "POST", "/management/v1/users/unknown/_unlock", e.AdminToken, "", map[string]any{}, 404, 5)
		usrRefused(t, e, "another organization's user", "POST", "/management/v1/users/"+stranger+"/_unlock", e.AdminToken, "", map[string]any{}, 404, 5)
	})
}
