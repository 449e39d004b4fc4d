package management_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// Who may touch whose second factor: a user its own, a user manager those
// of users it dominates (not an owner's), nobody another organization's;
// a removal by an admin ends the user's access, one by the user does not.
func TestFactorAuthorization(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		owner, manager, plain, other := e.SeedUser(e.OrgID, "owner"), e.SeedUser(e.OrgID, "manager"), e.SeedUser(e.OrgID, "plain"), e.SeedUser(e.OrgID, "other")
		e.SeedMember(e.OrgID, owner, "ORG_OWNER")
		e.SeedMember(e.OrgID, manager, "ORG_USER_MANAGER")
		otherOrg, stranger := e.SeedOrg("Other Corp", "stranger")
		_ = otherOrg
		tok := map[string]string{"owner": e.Intro.Mint(owner), "manager": e.Intro.Mint(manager), "plain": e.Intro.Mint(plain),
			"stranger": e.Intro.Mint(stranger)}

		enroll := func(who, user string) {
			t.Helper()
			r := e.REST("POST", "/v2/users/"+user+"/totp", tok[who], "", map[string]any{})
			if r.Status != 200 {
				t.Fatalf("%s registers %s's TOTP: %d %s", who, user, r.Status, r.Body)
			}
			code, _ := totp.GenerateCode(r.JSON["secret"].(string), time.Now())
			if r := e.REST("POST", "/v2/users/"+user+"/totp/verify", tok[who], "", map[string]any{"code": code}); r.Status != 200 {
				t.Fatalf("%s verifies %s's TOTP: %d %s", who, user, r.Status, r.Body)
			}
		}
		enroll("plain", plain) // a user without roles: its own
		enroll("owner", owner)
		for _, c := range []struct {
			who, method, path string
			want              int
		}{
			{"plain", "POST", "/v2/users/" + other + "/totp", 403},                            // another user's
			{"stranger", "POST", "/v2/users/" + plain + "/totp", 404},                         // another organization's user
			{"manager", "DELETE", "/management/v1/users/" + owner + "/auth_factors/otp", 403}, // an owner's: no dominance
			{"manager", "DELETE", "/v2/users/" + owner + "/totp", 403},
			{"manager", "POST", "/management/v1/users/" + owner + "/auth_factors/_search", 403},
			{"plain", "POST", "/management/v1/users/" + plain + "/auth_factors/_search", 200},
		} {
			if r := e.REST(c.method, c.path, tok[c.who], "", nil); r.Status != c.want {
				t.Errorf("%s %s %s: %d %s; want %d", c.who, c.method, c.path, r.Status, r.Body, c.want)
			}
		}
		// The owner's factor is still there; the manager removes plain's,
		// which ends plain's access; plain removing its own would not.
		if r := e.REST("POST", "/management/v1/users/"+owner+"/auth_factors/_search", e.AdminToken, "", nil); r.Status != 200 || len(r.JSON["result"].([]any)) != 1 {
			t.Fatalf("owner's factors: %d %s", r.Status, r.Body)
		}
		if r := e.REST("DELETE", "/management/v1/users/"+plain+"/auth_factors/otp", tok["manager"], "", nil); r.Status != 200 {
			t.Fatalf("manager removes plain's: %d %s", r.Status, r.Body)
		}
		if !slices.Contains(e.Intro.CutUsers(), plain) {
			t.Fatal("an admin's removal did not revoke the user's tokens")
		}
		if r := e.REST("DELETE", "/v2/users/"+owner+"/totp", tok["owner"], "", nil); r.Status != 200 {
			t.Fatalf("owner removes its own: %d %s", r.Status, r.Body)
		}
		if slices.Contains(e.Intro.CutUsers(), owner) {
			t.Fatal("removing one's own factor revoked one's own tokens")
		}
	})
}
