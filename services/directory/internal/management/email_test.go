package management_test

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// The address API's rules beyond the role matrix: a user sets its own
// address only with a code mailed to it (no return_code, no is_verified),
// a manager who dominates the user may mark it verified or take the code;
// a manager's mark counts as the organization's word, an IAM owner's as
// proof; a user manager cannot touch an owner's address.
func TestEmailAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		owner, manager, plain := e.SeedUser(e.OrgID, "owner"), e.SeedUser(e.OrgID, "manager"), e.SeedUser(e.OrgID, "plain")
		e.SeedMember(e.OrgID, owner, "ORG_OWNER")
		e.SeedMember(e.OrgID, manager, "ORG_USER_MANAGER")
		tok := map[string]string{"manager": e.Intro.Mint(manager), "plain": e.Intro.Mint(plain), "iam": e.AdminToken}

		for _, c := range []struct {
			who, method, path string
			body              map[string]any
			want              int
		}{
			{"plain", "POST", "/v2/users/" + plain + "/email", map[string]any{"email": "plain@new.test", "returnCode": map[string]any{}}, 400},
			{"plain", "POST", "/v2/users/" + plain + "/email", map[string]any{"email": "plain@new.test", "isVerified": true}, 400},
			{"plain", "POST", "/v2/users/" + plain + "/email", map[string]any{"email": "plain@new.test", "sendCode": map[string]any{"urlTemplate": "https://evil.test/{{.Code}}"}}, 400},
			{"plain", "POST", "/v2/users/" + plain + "/email", map[string]any{"email": "not an address"}, 400},
			{"plain", "POST", "/v2/users/" + plain + "/email", map[string]any{"email": "plain@new.test"}, 200}, // mailed
			{"plain", "POST", "/v2/users/" + plain + "/email/resend", map[string]any{"returnCode": map[string]any{}}, 400},
			{"plain", "POST", "/v2/users/" + plain + "/email/resend", map[string]any{}, 429}, // within the minute
			{"plain", "POST", "/v2/users/" + plain + "/email/verify", map[string]any{"verificationCode": "WRONG"}, 400},
			{"plain", "POST", "/v2/users/" + manager + "/email", map[string]any{"email": "m@new.test"}, 403},
			{"plain", "PUT", "/management/v1/users/" + plain + "/email", map[string]any{"email": "p@new.test", "isEmailVerified": true}, 403},
			{"manager", "PUT", "/management/v1/users/" + owner + "/email", map[string]any{"email": "o@new.test", "isEmailVerified": true}, 403},
			{"manager", "POST", "/management/v1/users/" + owner + "/_resend_initialization", map[string]any{}, 403},
			{"manager", "POST", "/management/v1/users/" + plain + "/_resend_initialization", map[string]any{}, 409}, // has a password
			{"manager", "PUT", "/management/v1/users/" + plain + "/email", map[string]any{"email": "plain@marked.test", "isEmailVerified": true}, 200},
			{"manager", "PUT", "/management/v1/users/" + plain + "/email", map[string]any{"email": "plain@marked.test", "isEmailVerified": true}, 409}, // unchanged
			{"manager", "POST", "/management/v1/users/" + plain + "/email/_resend_verification", map[string]any{}, 409},                                // verified
			{"manager", "PUT", "/management/v1/users/" + manager + "/email", map[string]any{"email": "PLAIN@marked.test", "isEmailVerified": true}, 409},
		} {
			if r := e.REST(c.method, c.path, tok[c.who], "", c.body); r.Status != c.want {
				t.Fatalf("%s %s %s %v: %d %s; want %d", c.who, c.method, c.path, c.body, r.Status, r.Body, c.want)
			}
		}
		proven := func(id string) (verified, proven bool) {
			t.Helper()
			var row struct {
				V bool `db:"email_verified"`
				P bool `db:"email_proven"`
			}
			if err := e.DB.Get(t.Context(), &row, `SELECT email_verified, email_proven FROM users WHERE id = ?`, id); err != nil {
				t.Fatal(err)
			}
			return row.V, row.P
		}
		if v, p := proven(plain); !v || p {
			t.Fatalf("a user manager's mark: verified %v proven %v; want the organization's word only", v, p)
		}
		// The IAM owner's mark is proof; so is a code mailed to the user.
		e.REST("PUT", "/management/v1/users/"+manager+"/email", tok["iam"], "", map[string]any{"email": "manager@iam.test", "isEmailVerified": true})
		if v, p := proven(manager); !v || !p {
			t.Fatalf("an IAM owner's mark: verified %v proven %v", v, p)
		}
		// A manager takes a code and hands it on: verified, not proven.
		r := e.REST("POST", "/v2/users/"+owner+"/email", tok["iam"], "", map[string]any{"email": "owner@new.test", "returnCode": map[string]any{}})
		code, _ := r.JSON["verificationCode"].(string)
		if r.Status != 200 || len(code) < 20 {
			t.Fatalf("return_code: %d %s", r.Status, r.Body)
		}
		if r := e.REST("POST", "/v2/users/"+owner+"/email/verify", e.Intro.Mint(owner), "", map[string]any{"verificationCode": code}); r.Status != 200 {
			t.Fatalf("verify with the code: %d %s", r.Status, r.Body)
		}
		if v, p := proven(owner); !v || p {
			t.Fatalf("a returned code: verified %v proven %v", v, p)
		}
		if r := e.REST("POST", "/v2/users/"+owner+"/email/verify", e.Intro.Mint(owner), "", map[string]any{"verificationCode": code}); r.Status != 400 {
			t.Fatalf("the code again: %d %s", r.Status, r.Body)
		}
	})
}
