package management_test

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// The reset API under the rules: a user manager resets a plain user's
// password by mail or by a returned code, but not an owner's; a user sets
// its own password only with a code, which works once; SMS and foreign
// link templates are refused; a second mail within the minute is 429.
func TestPasswordResetAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		owner, manager, plain := e.SeedUser(e.OrgID, "owner"), e.SeedUser(e.OrgID, "manager"), e.SeedUser(e.OrgID, "plain")
		e.SeedMember(e.OrgID, owner, "ORG_OWNER")
		e.SeedMember(e.OrgID, manager, "ORG_USER_MANAGER")
		tok := map[string]string{"manager": e.Intro.Mint(manager), "plain": e.Intro.Mint(plain)}

		for _, c := range []struct {
			who, path string
			body      map[string]any
			want      int
		}{
			{"manager", "/management/v1/users/" + plain + "/password/_reset", map[string]any{"type": "TYPE_EMAIL"}, 200},
			{"manager", "/management/v1/users/" + plain + "/password/_reset", map[string]any{"type": "TYPE_EMAIL"}, 429}, // within the minute
			{"manager", "/management/v1/users/" + owner + "/password/_reset", map[string]any{}, 403},                     // does not dominate
			{"plain", "/management/v1/users/" + plain + "/password/_reset", map[string]any{}, 403},                       // not for oneself
			{"manager", "/management/v1/users/" + manager + "/password/_reset", map[string]any{"type": "TYPE_SMS"}, 400},
			{"manager", "/v2/users/" + plain + "/password_reset", map[string]any{"sendLink": map[string]any{"urlTemplate": "https://evil.example/{{.Code}}"}}, 400},
			{"manager", "/v2/users/" + plain + "/password_reset", map[string]any{"sendLink": map[string]any{"notificationType": "NOTIFICATION_TYPE_SMS"}}, 400},
			{"manager", "/v2/users/" + owner + "/password_reset", map[string]any{"returnCode": map[string]any{}}, 403},
			{"plain", "/v2/users/" + plain + "/password", map[string]any{"newPassword": map[string]any{"password": "Plain-N3w-Passw0rd"}}, 400}, // no code
			{"plain", "/v2/users/" + plain + "/password", map[string]any{"newPassword": map[string]any{"password": "Plain-N3w-Passw0rd"},
				"currentPassword": "whatever"}, 400},
			{"plain", "/v2/users/" + plain + "/password", map[string]any{"newPassword": map[string]any{"password": "Plain-N3w-Passw0rd"},
				"verificationCode": "WRONG"}, 400},
		} {
			if r := e.REST("POST", c.path, tok[c.who], "", c.body); r.Status != c.want {
				t.Fatalf("%s POST %s %v: %d %s; want %d", c.who, c.path, c.body, r.Status, r.Body, c.want)
			}
		}

		r := e.REST("POST", "/v2/users/"+plain+"/password_reset", tok["manager"], "", map[string]any{"returnCode": map[string]any{}})
		code, _ := r.JSON["verificationCode"].(string)
		if r.Status != 200 || len(code) < 20 {
			t.Fatalf("return_code: %d %s", r.Status, r.Body)
		}
		set := map[string]any{"newPassword": map[string]any{"password": "Plain-N3w-Passw0rd"}, "verificationCode": code}
		if r := e.REST("POST", "/v2/users/"+plain+"/password", tok["plain"], "", set); r.Status != 200 {
			t.Fatalf("the user sets its password with the code: %d %s", r.Status, r.Body)
		}
		// The code is used up, and the change cut the user's tokens.
		if r := e.REST("POST", "/v2/users/"+plain+"/password", e.AdminToken, "", set); r.Status != 400 {
			t.Fatalf("the code again: %d %s", r.Status, r.Body)
		}
		var nb int
		if err := e.DB.Get(t.Context(), &nb, `SELECT COUNT(*) FROM users WHERE id = ? AND sessions_not_before IS NOT NULL`, plain); err != nil || nb != 1 {
			t.Fatalf("the user's sessions were not cut: %d, %v", nb, err)
		}
		// A manager sets it without a code.
		if r := e.REST("POST", "/v2/users/"+plain+"/password", tok["manager"], "", map[string]any{"newPassword": map[string]any{"password": "Plain-Ot3er-Passw0rd"}}); r.Status != 200 {
			t.Fatalf("a manager sets it: %d %s", r.Status, r.Body)
		}
	})
}
