package internalapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

const pw = "Corr3ct-Horse"

func register(t *testing.T, c directoryv1connect.DirectoryServiceClient, org, name, email string) *directoryv1.User {
	t.Helper()
	res, err := c.RegisterUser(context.Background(), &directoryv1.RegisterUserRequest{
		OrgId: org, UserName: name, FirstName: "Grace", LastName: "Hopper", Email: email, Password: pw, PreferredLanguage: "de",
	})
	if err != nil {
		t.Fatalf("RegisterUser %s: %v", name, err)
	}
	return res.GetUser()
}

func verify(c directoryv1connect.DirectoryServiceClient, org, login, password, addr string) (*directoryv1.VerifyPasswordResponse, error) {
	res, err := c.VerifyPassword(context.Background(), &directoryv1.VerifyPasswordRequest{
		OrgId: org, LoginName: login, Password: password, ClientAddress: addr,
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func TestInternalAPI(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		c := e.Internal(mgmttest.InternalToken)

		t.Run("credential required", func(t *testing.T) {
			for _, tok := range []string{"", "wrong-token-wrong-token-wrong-token"} {
				_, err := e.Internal(tok).GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: e.OrgID})
				if connect.CodeOf(err) != connect.CodeUnauthenticated {
					t.Fatalf("token %q: %v; want Unauthenticated", tok, err)
				}
			}
		})

		// Self-registration is off unless the organization's login policy
		// allows it.
		if _, err := c.RegisterUser(ctx, &directoryv1.RegisterUserRequest{
			OrgId: e.OrgID, UserName: "early", FirstName: "E", LastName: "R", Email: "e@example.com", Password: pw}); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("registration under the default policy: %v; want PermissionDenied", err)
		}
		if r := e.REST("POST", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
			"allowUsernamePassword": true, "allowRegister": true}); r.Status != 200 {
			t.Fatalf("AddCustomLoginPolicy: %d %s", r.Status, r.Body)
		}
		grace := register(t, c, e.OrgID, "grace", "grace@navy.example")
		if grace.GetPreferredLoginName() != "grace@acme-corp.localhost" || grace.GetPreferredLanguage() != "de" {
			t.Fatalf("registered user %v", grace)
		}

		t.Run("register refuses policy violations and duplicates", func(t *testing.T) {
			_, err := c.RegisterUser(ctx, &directoryv1.RegisterUserRequest{
				OrgId: e.OrgID, UserName: "weak", FirstName: "W", LastName: "K", Email: "w@example.com", Password: "short"})
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("weak password: %v", err)
			}
			_, err = c.RegisterUser(ctx, &directoryv1.RegisterUserRequest{
				OrgId: e.OrgID, UserName: "grace", FirstName: "G", LastName: "H", Email: "g2@example.com", Password: pw})
			if connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatalf("duplicate: %v", err)
			}
		})

		t.Run("login names", func(t *testing.T) {
			for _, login := range []string{"grace@acme-corp.localhost", "GRACE", "grace", "grace@navy.example"} {
				res, err := c.LookupUser(ctx, &directoryv1.LookupUserRequest{OrgId: e.OrgID, LoginName: login})
				// The registered email is not verified: lookup by email must fail.
				if login == "grace@navy.example" {
					if connect.CodeOf(err) != connect.CodeNotFound {
						t.Fatalf("unverified email lookup: %v; want NotFound", err)
					}
					continue
				}
				if err != nil || res.GetUser().GetId() != grace.GetId() {
					t.Fatalf("lookup %q: %v %v", login, res, err)
				}
			}
			other, _ := e.SeedOrg("Other", "boss")
			if _, err := c.LookupUser(ctx, &directoryv1.LookupUserRequest{OrgId: other, LoginName: "grace"}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("lookup in another org: %v; want NotFound", err)
			}
			// A verified e-mail signs in, unless the login policy turns that off.
			r := e.REST("POST", "/management/v1/users/human", e.AdminToken, "", map[string]any{"userName": "mailer",
				"profile": map[string]any{"firstName": "M", "lastName": "L"}, "email": map[string]any{"email": "mailer@navy.example", "isEmailVerified": true}})
			if r.Status != 200 {
				t.Fatalf("AddHumanUser: %d %s", r.Status, r.Body)
			}
			byEmail := func() error {
				_, err := c.LookupUser(ctx, &directoryv1.LookupUserRequest{OrgId: e.OrgID, LoginName: "mailer@navy.example"})
				return err
			}
			if err := byEmail(); err != nil {
				t.Fatalf("lookup by verified e-mail: %v", err)
			}
			if r := e.REST("PUT", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
				"allowUsernamePassword": true, "allowRegister": true, "disableLoginWithEmail": true}); r.Status != 200 {
				t.Fatalf("UpdateCustomLoginPolicy: %d %s", r.Status, r.Body)
			}
			if err := byEmail(); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("lookup by e-mail with disableLoginWithEmail: %v; want NotFound", err)
			}
		})

		t.Run("org with the login policy in force", func(t *testing.T) {
			got, err := c.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: e.OrgID})
			if err != nil || got.GetId() != e.OrgID || !got.GetActive() || !got.GetLoginPolicy().GetAllowRegister() {
				t.Fatalf("GetOrg with its own policy (allowRegister) = %v, %v", got, err)
			}
			other, _ := e.SeedOrg("Defaults", "dora")
			got, err = c.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: other})
			if lp := got.GetLoginPolicy(); err != nil || lp.GetAllowRegister() || !lp.GetAllowUsernamePassword() || !lp.GetIgnoreUnknownUsernames() {
				t.Fatalf("GetOrg without a policy of its own = %v, %v; want the default policy", got, err)
			}
			if _, err := c.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: "no-such-org"}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("GetOrg of an unknown org: %v; want NotFound", err)
			}
			// A policy without passwords refuses them before any check.
			setPolicy := func(passwords bool) {
				t.Helper()
				if r := e.REST("PUT", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
					"allowUsernamePassword": passwords, "allowRegister": true, "disableLoginWithEmail": true}); r.Status != 200 {
					t.Fatalf("UpdateCustomLoginPolicy: %d %s", r.Status, r.Body)
				}
			}
			setPolicy(false)
			if _, err := verify(c, e.OrgID, "grace", pw, "192.0.2.9"); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("password where the policy forbids them: %v; want PermissionDenied", err)
			}
			setPolicy(true)
			// An unknown organization answers like a wrong password.
			if _, err := verify(c, "no-such-org", "grace", pw, "192.0.2.9"); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("password in an unknown org: %v; want Unauthenticated", err)
			}
		})

		t.Run("verify password", func(t *testing.T) {
			res, err := verify(c, e.OrgID, "grace", pw, "192.0.2.1")
			if err != nil || res.GetUser().GetId() != grace.GetId() || res.GetChangeRequired() {
				t.Fatalf("right password: %v %v", res, err)
			}
			_, errWrong := verify(c, e.OrgID, "grace", "wrong", "192.0.2.1")
			_, errUnknown := verify(c, e.OrgID, "nobody", "wrong", "192.0.2.1")
			if connect.CodeOf(errWrong) != connect.CodeUnauthenticated || errWrong.Error() != errUnknown.Error() {
				t.Fatalf("wrong password %v and unknown user %v must answer alike", errWrong, errUnknown)
			}
		})

		// After lockout.PairFreeFailures failures of one (name, address)
		// pair the next attempt waits; one that comes too early is refused
		// even with the right password, and every refusal reads exactly like
		// a wrong password, for known and unknown names alike.
		t.Run("progressive delay looks like a wrong password", func(t *testing.T) {
			u := register(t, c, e.OrgID, "slowpoke", "slowpoke@example.com")
			const addr = "192.0.2.50"
			var wrong []error
			// The unknown name first: the known one's early attempts then
			// follow its last failure at once, well within the first
			// delay (a second) even on a loaded machine; an unknown name
			// is refused whenever it comes.
			for _, login := range []string{"ghost", "slowpoke"} {
				for range lockout.PairFreeFailures {
					_, err := verify(c, e.OrgID, login, "wrong", addr)
					wrong = append(wrong, err)
				}
			}
			_, early := verify(c, e.OrgID, "slowpoke", pw, addr)
			// Another of the user's names is the same account.
			_, earlyOtherName := verify(c, e.OrgID, "SLOWPOKE@acme-corp.localhost", pw, addr)
			_, earlyUnknown := verify(c, e.OrgID, "ghost", pw, addr)
			for i, err := range append(wrong, early, earlyOtherName, earlyUnknown) {
				if connect.CodeOf(err) != connect.CodeUnauthenticated || err.Error() != wrong[0].Error() {
					t.Fatalf("answer %d: %v; want exactly %v", i, err, wrong[0])
				}
			}
			// From another address the user signs in at once.
			if res, err := verify(c, e.OrgID, "slowpoke", pw, "192.0.2.51"); err != nil || res.GetUser().GetId() != u.GetId() {
				t.Fatalf("right password from another address: %v %v", res, err)
			}
			time.Sleep(lockout.PairDelay(lockout.PairFreeFailures) + 100*time.Millisecond)
			if res, err := verify(c, e.OrgID, "slowpoke", pw, addr); err != nil || res.GetUser().GetId() != u.GetId() {
				t.Fatalf("right password after the wait: %v %v", res, err)
			}
		})

		t.Run("lockout per address", func(t *testing.T) {
			var err error
			for i := range lockout.AddressMaxFailures {
				_, err = verify(c, e.OrgID, fmt.Sprintf("nobody-%d", i), "x", "198.51.100.7")
			}
			_, errLocked := verify(c, e.OrgID, "grace", pw, "198.51.100.7")
			if connect.CodeOf(errLocked) != connect.CodeUnauthenticated || errLocked.Error() != err.Error() {
				t.Fatalf("right password from a locked address: %v; want the wrong-password answer %v", errLocked, err)
			}
			if _, err := verify(c, e.OrgID, "grace", pw, "198.51.100.8"); err != nil {
				t.Fatalf("other address: %v", err)
			}
		})

		// The account lock of lockout_max_attempts is an organization's
		// opt-in (no organization has it by default); it then holds from
		// every address and survives a restart.
		t.Run("account lock is opt-in and survives restart", func(t *testing.T) {
			var max int
			if err := e.DB.Get(ctx, &max, `SELECT lockout_max_attempts FROM orgs WHERE id = ?`, e.OrgID); err != nil || max != 0 {
				t.Fatalf("lockout_max_attempts of a new organization: %d, %v; want 0", max, err)
			}
			if _, err := e.DB.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 4 WHERE id = ?`, e.OrgID); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = e.DB.Exec(ctx, `UPDATE orgs SET lockout_max_attempts = 0 WHERE id = ?`, e.OrgID) })
			register(t, c, e.OrgID, "locky", "locky@example.com")
			var wrong error
			for i := range 4 {
				_, wrong = verify(c, e.OrgID, "locky", "wrong", fmt.Sprintf("203.0.113.%d", i))
			}
			e.Restart()
			c = e.Internal(mgmttest.InternalToken)
			if _, err := verify(c, e.OrgID, "locky", pw, "203.0.113.99"); connect.CodeOf(err) != connect.CodeUnauthenticated || err.Error() != wrong.Error() {
				t.Fatalf("right password of a locked account after restart: %v; want the wrong-password answer", err)
			}
		})

		t.Run("deactivated user cannot sign in", func(t *testing.T) {
			u := register(t, c, e.OrgID, "gone", "gone@example.com")
			if _, err := e.DB.Exec(ctx, `UPDATE users SET state = 2 WHERE id = ?`, u.GetId()); err != nil {
				t.Fatal(err)
			}
			if _, err := verify(c, e.OrgID, "gone", pw, ""); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Fatalf("deactivated: %v; want FailedPrecondition", err)
			}
			if _, err := verify(c, e.OrgID, "gone", "wrong", ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("deactivated with wrong password: %v; want Unauthenticated (state not revealed)", err)
			}
		})

		t.Run("change password", func(t *testing.T) {
			_, err := c.ChangePassword(ctx, &directoryv1.ChangePasswordRequest{UserId: grace.GetId(), CurrentPassword: pw, NewPassword: pw})
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("reuse: %v; want InvalidArgument", err)
			}
			if _, err := c.ChangePassword(ctx, &directoryv1.ChangePasswordRequest{UserId: grace.GetId(), CurrentPassword: "wrong", NewPassword: "N3w-Password"}); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("wrong current: %v", err)
			}
			if _, err := c.ChangePassword(ctx, &directoryv1.ChangePasswordRequest{UserId: grace.GetId(), CurrentPassword: pw, NewPassword: "N3w-Password"}); err != nil {
				t.Fatal(err)
			}
			if _, err := verify(c, e.OrgID, "grace", "N3w-Password", ""); err != nil {
				t.Fatalf("new password: %v", err)
			}
		})

		t.Run("claims per scope", func(t *testing.T) {
			if _, err := e.DB.Exec(ctx, `INSERT INTO user_metadata (user_id, key, value, org_id, creation_date, change_date, sequence)
				SELECT id, 'team', ?, org_id, creation_date, change_date, sequence FROM users WHERE id = ?`, []byte("blue"), grace.GetId()); err != nil {
				t.Fatal(err)
			}
			get := func(scopes ...string) map[string]any {
				res, err := c.GetClaims(ctx, &directoryv1.GetClaimsRequest{UserId: grace.GetId(), Scopes: scopes})
				if err != nil {
					t.Fatal(err)
				}
				return res.GetClaims().AsMap()
			}
			if m := get("openid"); len(m) != 1 || m["sub"] != grace.GetId() {
				t.Fatalf("openid claims %v; want only sub", m)
			}
			m := get("openid", "profile", "email")
			if m["given_name"] != "Grace" || m["family_name"] != "Hopper" || m["locale"] != "de" ||
				m["preferred_username"] != "grace@acme-corp.localhost" || m["email"] != "grace@navy.example" || m["email_verified"] != false {
				t.Fatalf("profile+email claims %v", m)
			}
			if _, ok := m["phone_number"]; ok {
				t.Fatalf("phone claim without phone scope: %v", m)
			}
			// An organization owner's mark counts only in a domain the
			// organization verified (its generated primary domain here);
			// an IAM owner's everywhere.
			owner := e.SeedUser(e.OrgID, "claims-owner")
			e.SeedMember(e.OrgID, owner, "ORG_OWNER")
			ownerToken := e.Intro.Mint(owner)
			for i, tc := range []struct {
				addr, by string
				want     bool
			}{{"ada@example.com", ownerToken, false}, {"ada@acme-corp.localhost", ownerToken, true},
				{"ida@ACME-CORP.localhost", ownerToken, true}, {"iam@example.com", e.AdminToken, true}} {
				addr, want := tc.addr, tc.want
				r := e.REST("POST", "/management/v1/users/human", tc.by, "", map[string]any{
					"userName": fmt.Sprintf("verified-%d", i), "profile": map[string]any{"firstName": "A", "lastName": "L"},
					"email": map[string]any{"email": addr, "isEmailVerified": true}, "initialPassword": pw})
				if r.Status != 200 {
					t.Fatalf("AddHumanUser %s: %d %s", addr, r.Status, r.Body)
				}
				id, _ := r.JSON["userId"].(string)
				res, err := c.GetClaims(ctx, &directoryv1.GetClaimsRequest{UserId: id, Scopes: []string{"email"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := res.GetClaims().AsMap()["email_verified"]; got != want {
					t.Errorf("email_verified of %s = %v; want %v", addr, got, want)
				}
			}
			m = get("openid", "urn:gatehouse:iam:user:metadata", "urn:gatehouse:iam:user:resourceowner")
			md, _ := m["urn:gatehouse:iam:user:metadata"].(map[string]any)
			if md["team"] != base64.StdEncoding.EncodeToString([]byte("blue")) || m["urn:gatehouse:iam:user:resourceowner:id"] != e.OrgID ||
				m["urn:gatehouse:iam:user:resourceowner:primary_domain"] != "acme-corp.localhost" {
				t.Fatalf("reserved-scope claims %v", m)
			}
		})

		t.Run("org and roles", func(t *testing.T) {
			org, err := c.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: e.OrgID})
			if err != nil || org.GetName() != "Acme Corp" || org.GetPasswordPolicy().GetMinLength() != 8 {
				t.Fatalf("GetOrg %v %v", org, err)
			}
			roles, err := c.GetRoles(ctx, &directoryv1.GetRolesRequest{UserId: e.AdminID, OrgId: e.OrgID})
			if err != nil || len(roles.GetRoles()) != 2 {
				t.Fatalf("admin roles %v %v; want IAM_OWNER and ORG_OWNER", roles, err)
			}
		})
	})
}
