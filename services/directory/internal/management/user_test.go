package management_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func addHuman(userName, password string) *managementv1.AddHumanUserRequest {
	return &managementv1.AddHumanUserRequest{
		UserName:        userName,
		Profile:         &managementv1.AddHumanUserRequest_Profile{FirstName: "Ada", LastName: "Lovelace"},
		Email:           &managementv1.AddHumanUserRequest_Email{Email: userName + "@example.com", IsEmailVerified: true},
		InitialPassword: password,
	}
}

func TestHumanUserOverEveryProtocol(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		for _, proto := range mgmttest.Protocols {
			t.Run(proto, func(t *testing.T) {
				c := e.Client(proto, e.AdminToken, "")
				name := "ada-" + strings.ReplaceAll(proto, "-", "")
				res, err := c.AddHumanUser(ctx, addHuman(name, "Secret-Passw0rd"))
				if err != nil {
					t.Fatalf("AddHumanUser: %v", err)
				}
				id := res.GetUserId()
				evs := e.Events(id)
				if len(evs) != 1 {
					t.Fatalf("events = %d; want 1", len(evs))
				}
				det := res.GetDetails()
				if det.GetSequence() != evs[0].Sequence || !det.GetCreationDate().AsTime().Equal(evs[0].CreatedAt) ||
					!det.GetChangeDate().AsTime().Equal(evs[0].CreatedAt) || det.GetResourceOwner() != e.OrgID {
					t.Fatalf("details = %v; want sequence %d, dates %v, owner %s", det, evs[0].Sequence, evs[0].CreatedAt, e.OrgID)
				}
				got, err := c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: id})
				if err != nil {
					t.Fatalf("GetUserByID: %v", err)
				}
				u := got.GetUser()
				wantLogin := name + "@acme-corp.localhost"
				if u.GetPreferredLoginName() != wantLogin || len(u.GetLoginNames()) != 1 || u.GetLoginNames()[0] != wantLogin {
					t.Fatalf("login names %v / %q; want %q", u.GetLoginNames(), u.GetPreferredLoginName(), wantLogin)
				}
				if u.GetState() != managementv1.UserState_USER_STATE_ACTIVE || u.GetHuman().GetProfile().GetDisplayName() != "Ada Lovelace" ||
					!u.GetHuman().GetEmail().GetIsEmailVerified() {
					t.Fatalf("user = %v", u)
				}
				if rd := u.GetDetails(); rd.GetSequence() != evs[0].Sequence || !rd.GetCreationDate().AsTime().Equal(evs[0].CreatedAt) {
					t.Fatalf("read details = %v; want the creation event's", rd)
				}

				// SetHumanPassword: details of the new event; read details move on.
				pw, err := c.SetHumanPassword(ctx, &managementv1.SetHumanPasswordRequest{UserId: id, Password: "An0ther-Passw0rd", NoChangeRequired: true})
				if err != nil {
					t.Fatalf("SetHumanPassword: %v", err)
				}
				evs = e.Events(id)
				if len(evs) != 2 || pw.GetDetails().GetSequence() != evs[1].Sequence {
					t.Fatalf("password details %v; events %d", pw.GetDetails(), len(evs))
				}
				got, _ = c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: id})
				if rd := got.GetUser().GetDetails(); rd.GetSequence() != evs[1].Sequence ||
					!rd.GetCreationDate().AsTime().Equal(evs[0].CreatedAt) || !rd.GetChangeDate().AsTime().Equal(evs[1].CreatedAt) {
					t.Fatalf("read details after change = %v", rd)
				}

				_, err = c.AddHumanUser(ctx, addHuman(name, ""))
				if connect.CodeOf(err) != connect.CodeAlreadyExists {
					t.Fatalf("duplicate user name: %v; want AlreadyExists", err)
				}
				_, err = c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: "nope"})
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("unknown user: %v; want NotFound", err)
				}
			})
		}
	})
}

func TestPasswordLimitsAndPolicy(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		id := e.SeedUser(e.OrgID, "bob")
		path := "/management/v1/users/" + id + "/password"
		ok72 := "Aa1" + strings.Repeat("x", 69)
		cases := []struct {
			name     string
			body     any
			status   int
			detailID string
		}{
			{"empty", map[string]any{"password": ""}, 400, "USER-password-empty"},
			{"one character (policy)", map[string]any{"password": "A"}, 400, "USER-password-policy"},
			{"72 characters", map[string]any{"password": ok72, "noChangeRequired": true}, 200, ""},
			{"73 characters", map[string]any{"password": ok72 + "x"}, 400, "USER-password-too-long"},
			{"no digit", map[string]any{"password": "Abcdefghij"}, 400, "USER-password-policy"},
			{"reused", map[string]any{"password": ok72}, 400, "USER-password-reused"},
			{"malformed JSON", `{"password": `, 400, ""},
			{"unknown field ignored", map[string]any{"password": "Brand-New-1", "colour": "blue", "noChangeRequired": true}, 200, ""},
		}
		for _, tc := range cases {
			before := e.EventCount()
			r := e.REST("POST", path, e.AdminToken, "", tc.body)
			if r.Status != tc.status {
				t.Fatalf("%s: status %d %s; want %d", tc.name, r.Status, r.Body, tc.status)
			}
			if tc.status != 200 {
				if after := e.EventCount(); after != before {
					t.Fatalf("%s: refused request added %d events", tc.name, after-before)
				}
				if r.Code() != 3 {
					t.Fatalf("%s: code %d; want 3 (InvalidArgument)", tc.name, r.Code())
				}
			}
			if tc.detailID != "" {
				if id, typ := r.Detail(); id != tc.detailID || typ != "type.googleapis.com/gatehouse.management.v1.ErrorDetail" {
					t.Fatalf("%s: detail %q %q; want %q ErrorDetail", tc.name, id, typ, tc.detailID)
				}
			}
		}
		// noChangeRequired absent means the user must change it.
		var required bool
		_ = e.DB.Get(context.Background(), &required, `SELECT password_change_required FROM users WHERE id = ?`, id)
		if required {
			t.Fatal("noChangeRequired true left change required")
		}
		if r := e.REST("POST", path, e.AdminToken, "", map[string]any{"password": "Changed-Again-2"}); r.Status != 200 {
			t.Fatalf("set password: %d %s", r.Status, r.Body)
		}
		_ = e.DB.Get(context.Background(), &required, `SELECT password_change_required FROM users WHERE id = ?`, id)
		if !required {
			t.Fatal("noChangeRequired absent did not require a change")
		}
	})
}

func TestAccessControl(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		otherOrg, otherOwner := e.SeedOrg("Other Org", "owner2")
		plain := e.SeedUser(e.OrgID, "plain")
		manager := e.SeedUser(e.OrgID, "manager")
		e.SeedMember(e.OrgID, manager, orgs.RoleOrgUserManager)
		target := e.SeedUser(otherOrg, "target")
		path := func(id string) string { return "/management/v1/users/" + id }

		cases := []struct {
			name   string
			token  string
			org    string
			id     string
			status int
		}{
			{"no token", "", "", plain, 401},
			{"unknown token", "garbage", "", plain, 401},
			{"wrong audience", e.Intro.MintWith(e.AdminID, []string{"someone-else"}, 3600e9), "", plain, 401},
			{"no role", e.Intro.Mint(plain), "", plain, 403},
			{"user manager reads own org", e.Intro.Mint(manager), "", plain, 200},
			{"user manager cannot switch org", e.Intro.Mint(manager), otherOrg, target, 403},
			{"other org's user without header is 404", e.AdminToken, "", target, 404},
			{"IAM_OWNER switches with header", e.AdminToken, otherOrg, target, 200},
			{"owner of other org with header", e.Intro.Mint(otherOwner), otherOrg, target, 200},
			{"owner of other org cannot reach ours", e.Intro.Mint(otherOwner), e.OrgID, plain, 403},
			{"unknown org for IAM_OWNER", e.AdminToken, "404404", plain, 404},
		}
		for _, tc := range cases {
			r := e.REST("GET", path(tc.id), tc.token, tc.org, nil)
			if r.Status != tc.status {
				t.Errorf("%s: status %d %s; want %d", tc.name, r.Status, r.Body, tc.status)
			}
			// Same answer over gRPC.
			_, err := e.Client("grpc", tc.token, tc.org).GetUserByID(context.Background(), &managementv1.GetUserByIDRequest{Id: tc.id})
			want := map[int]connect.Code{200: 0, 401: connect.CodeUnauthenticated, 403: connect.CodePermissionDenied, 404: connect.CodeNotFound}[tc.status]
			if connect.CodeOf(err) != want && !(want == 0 && err == nil) {
				t.Errorf("%s over gRPC: %v; want %v", tc.name, err, want)
			}
		}
		// AddOrg needs IAM_OWNER.
		if r := e.REST("POST", "/management/v1/orgs", e.Intro.Mint(otherOwner), "", map[string]any{"name": "Mine"}); r.Status != 403 {
			t.Fatalf("AddOrg by ORG_OWNER: %d; want 403", r.Status)
		}
	})
}

func TestOrgAndRestartSurvival(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		r := e.REST("POST", "/management/v1/orgs", e.AdminToken, "", map[string]any{"name": "Über Shop GmbH"})
		if r.Status != 200 {
			t.Fatalf("AddOrg: %d %s", r.Status, r.Body)
		}
		orgID, _ := r.JSON["id"].(string)
		if r := e.REST("POST", "/management/v1/orgs", e.AdminToken, "", map[string]any{"name": "Über Shop GmbH"}); r.Status != 409 {
			t.Fatalf("duplicate org: %d; want 409", r.Status)
		}
		if r := e.REST("POST", "/management/v1/orgs", e.AdminToken, "", map[string]any{"name": strings.Repeat("n", 201)}); r.Status != 400 {
			t.Fatalf("201-char org name: %d; want 400", r.Status)
		}
		if r := e.REST("POST", "/management/v1/orgs", e.AdminToken, "", map[string]any{"name": strings.Repeat("n", 200)}); r.Status != 200 {
			t.Fatalf("200-char org name: %d %s; want 200", r.Status, r.Body)
		}
		e.Restart()
		got := e.REST("GET", "/management/v1/orgs/me", e.AdminToken, orgID, nil)
		org, _ := got.JSON["org"].(map[string]any)
		if got.Status != 200 || org["name"] != "Über Shop GmbH" || org["primaryDomain"] != "uber-shop-gmbh.localhost" {
			t.Fatalf("GetMyOrg after restart: %d %s", got.Status, got.Body)
		}
		det, _ := org["details"].(map[string]any)
		evs := e.Events(orgID)
		if det["sequence"] != formatUint(evs[len(evs)-1].Sequence) {
			t.Fatalf("details.sequence %v (JSON string); want %d", det["sequence"], evs[len(evs)-1].Sequence)
		}
	})
}

func formatUint(n uint64) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return formatUint(n/10) + digits[n%10:n%10+1]
}

func TestUnknownEnumNameIs400(t *testing.T) {
	e := mgmttest.Start(t, db.SQLite)
	before := e.EventCount()
	r := e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", `{"userName":"m1","name":"M","accessTokenType":"ACCESS_TOKEN_TYPE_FANCY","extra":1}`)
	if r.Status != 400 || r.Code() != 3 || e.EventCount() != before {
		t.Fatalf("unknown enum name: %d %s; want 400 and nothing stored", r.Status, r.Body)
	}
	r = e.REST("POST", "/management/v1/users/machine", e.AdminToken, "", `{"userName":"m1","name":"M","accessTokenType":"ACCESS_TOKEN_TYPE_JWT","extra":1}`)
	if r.Status != 200 {
		t.Fatalf("known enum with an unknown field: %d %s; want 200", r.Status, r.Body)
	}
}
