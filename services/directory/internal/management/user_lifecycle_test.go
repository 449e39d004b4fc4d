package management_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

func TestDeactivateReactivateUser(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		for _, proto := range mgmttest.Protocols {
			t.Run(proto, func(t *testing.T) {
				c := e.Client(proto, e.AdminToken, "")
				id := e.SeedUser(e.OrgID, "life-"+proto)
				created := e.Events(id)[0]

				res, err := c.DeactivateUser(ctx, &managementv1.DeactivateUserRequest{Id: id})
				if err != nil {
					t.Fatalf("DeactivateUser: %v", err)
				}
				ev := usrLast(t, e, id)
				if ev.Type != users.EventDeactivated {
					t.Fatalf("event %s; want %s", ev.Type, users.EventDeactivated)
				}
				usrWantWrite(t, "deactivate", res.GetDetails(), ev)
				got, err := c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: id})
				if err != nil || got.GetUser().GetState() != managementv1.UserState_USER_STATE_INACTIVE {
					t.Fatalf("after deactivation: %v %v; want USER_STATE_INACTIVE", got, err)
				}
				usrWantRead(t, "read after deactivation", got.GetUser().GetDetails(), created, ev)

				before := e.EventCount()
				if _, err := c.DeactivateUser(ctx, &managementv1.DeactivateUserRequest{Id: id}); connect.CodeOf(err) != connect.CodeAborted {
					t.Fatalf("deactivating an inactive user: %v; want Aborted", err)
				}
				if after := e.EventCount(); after != before {
					t.Fatalf("refused deactivation added %d events", after-before)
				}

				res2, err := c.ReactivateUser(ctx, &managementv1.ReactivateUserRequest{Id: id})
				if err != nil {
					t.Fatalf("ReactivateUser: %v", err)
				}
				ev = usrLast(t, e, id)
				if ev.Type != users.EventReactivated {
					t.Fatalf("event %s; want %s", ev.Type, users.EventReactivated)
				}
				usrWantWrite(t, "reactivate", res2.GetDetails(), ev)
				got, _ = c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: id})
				if got.GetUser().GetState() != managementv1.UserState_USER_STATE_ACTIVE {
					t.Fatalf("after reactivation: state %v", got.GetUser().GetState())
				}
				before = e.EventCount()
				if _, err := c.ReactivateUser(ctx, &managementv1.ReactivateUserRequest{Id: id}); connect.CodeOf(err) != connect.CodeAborted {
					t.Fatalf("reactivating an active user: %v; want Aborted", err)
				}
				if _, err := c.DeactivateUser(ctx, &managementv1.DeactivateUserRequest{Id: "unknown"}); connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("unknown user: %v; want NotFound", err)
				}
				if after := e.EventCount(); after != before {
					t.Fatalf("refused requests added %d events", after-before)
				}
			})
		}

		t.Run("rest", func(t *testing.T) {
			otherOrg, _ := e.SeedOrg("Other Org", "owner2")
			foreign := e.SeedUser(otherOrg, "foreign")
			id := e.SeedUser(e.OrgID, "life-rest")
			tok := e.AdminToken
			deact := func(id string) string { return "/management/v1/users/" + id + "/_deactivate" }
			react := func(id string) string { return "/management/v1/users/" + id + "/_reactivate" }

			r := e.REST("POST", deact(id), tok, "", map[string]any{})
			if r.Status != 200 {
				t.Fatalf("deactivate: %d %s", r.Status, r.Body)
			}
			usrWantWriteJSON(t, "deactivate", r, usrLast(t, e, id))
			usrRefused(t, e, "deactivate again", "POST", deact(id), tok, "", map[string]any{}, 409, 10)
			// An inactive user can no longer call the API.
			e.SeedMember(e.OrgID, id, orgs.RoleOrgUserManager)
			usrRefused(t, e, "inactive caller", "POST", react(id), e.Intro.Mint(id), "", map[string]any{}, 401, 16)

			r = e.REST("POST", react(id), tok, "", map[string]any{})
			if r.Status != 200 {
				t.Fatalf("reactivate: %d %s", r.Status, r.Body)
			}
			usrWantWriteJSON(t, "reactivate", r, usrLast(t, e, id))
			usrRefused(t, e, "reactivate active", "POST", react(id), tok, "", map[string]any{}, 409, 10)

			// A user waiting for its first password is neither active nor inactive.
			add := e.REST("POST", "/management/v1/users/human", tok, "", map[string]any{
				"userName": "no-password", "profile": map[string]any{"firstName": "N", "lastName": "P"},
				"email": map[string]any{"email": "np@example.com"},
			})
			initial, _ := add.JSON["userId"].(string)
			if add.Status != 200 || initial == "" {
				t.Fatalf("add initial user: %d %s", add.Status, add.Body)
			}
			usrRefused(t, e, "deactivate initial", "POST", deact(initial), tok, "", map[string]any{}, 409, 10)
			usrRefused(t, e, "reactivate initial", "POST", react(initial), tok, "", map[string]any{}, 409, 10)

			usrRefused(t, e, "unknown user", "POST", deact("424242"), tok, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "other org's user", "POST", deact(foreign), tok, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "id of 201 characters", "POST", deact(strings.Repeat("1", 201)), tok, "", map[string]any{}, 400, 3)
			usrRefused(t, e, "no role", "POST", deact(id), e.Intro.Mint(e.SeedUser(e.OrgID, "plain")), "", map[string]any{}, 403, 7)
			usrRefused(t, e, "no token", "POST", deact(id), "", "", map[string]any{}, 401, 16)
			// With x-service-orgid an IAM_OWNER reaches the other org's user.
			if r := e.REST("POST", deact(foreign), tok, otherOrg, map[string]any{}); r.Status != 200 {
				t.Fatalf("deactivate in other org with header: %d %s", r.Status, r.Body)
			} else {
				usrWantWriteJSON(t, "deactivate in other org", r, usrLast(t, e, foreign))
			}

			e.Restart()
			got := e.REST("GET", "/management/v1/users/"+foreign, tok, otherOrg, nil)
			u, _ := got.JSON["user"].(map[string]any)
			if got.Status != 200 || u["state"] != "USER_STATE_INACTIVE" {
				t.Fatalf("after restart: %d %s; want USER_STATE_INACTIVE", got.Status, got.Body)
			}
			if r := e.REST("POST", react(foreign), tok, otherOrg, map[string]any{}); r.Status != 200 {
				t.Fatalf("reactivate after restart: %d %s", r.Status, r.Body)
			}
		})
	})
}

func TestRemoveUser(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		otherOrg, _ := e.SeedOrg("Other Org", "owner2")
		foreign := e.SeedUser(otherOrg, "foreign")

		// victim: member of both organizations and IAM_OWNER, with metadata.
		victim := e.SeedUser(e.OrgID, "victim")
		e.SeedMember(e.OrgID, victim, orgs.RoleOrgUserManager)
		e.SeedMember(otherOrg, victim, orgs.RoleOrgOwner)
		v, err := (&orgs.Queries{DB: e.DB}).InstanceVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.ES.Push(ctx, "test", orgs.InstanceMemberCommand(v, victim, []string{orgs.RoleIAMOwner})); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		if _, err := e.DB.Exec(ctx, `INSERT INTO user_metadata (user_id, key, value, org_id, creation_date, change_date, sequence)
			VALUES (?, 'k', ?, ?, ?, ?, 1)`, victim, []byte("v"), e.OrgID, now, now); err != nil {
			t.Fatal(err)
		}
		victimToken := e.Intro.Mint(victim)
		if r := e.REST("GET", "/management/v1/users/"+foreign, victimToken, otherOrg, nil); r.Status != 200 {
			t.Fatalf("victim before removal: %d", r.Status)
		}

		last := e.EventCount()
		var maxSeq uint64
		_ = e.DB.Get(ctx, &maxSeq, `SELECT MAX(sequence) FROM events`)
		r := e.REST("DELETE", "/management/v1/users/"+victim, e.AdminToken, "", nil)
		if r.Status != 200 {
			t.Fatalf("RemoveUser: %d %s", r.Status, r.Body)
		}
		added, err := e.ES.Events(ctx, eventstore.Filter{AfterSequence: maxSeq})
		if err != nil {
			t.Fatal(err)
		}
		if len(added) != 4 || e.EventCount() != last+4 {
			t.Fatalf("removal added %d events; want 4 (two org memberships, the instance membership, the user)", len(added))
		}
		want := map[string]string{e.OrgID: orgs.EventOrgMemberRemoved, otherOrg: orgs.EventOrgMemberRemoved, orgs.InstanceID: orgs.EventInstanceMemberRemoved}
		for _, ev := range added[:3] {
			if want[ev.AggregateID] != ev.Type || !strings.Contains(string(ev.Payload), `"userId":"`+victim+`"`) {
				t.Fatalf("event %s on %s payload %s; want a membership removal of %s", ev.Type, ev.AggregateID, ev.Payload, victim)
			}
			delete(want, ev.AggregateID)
			if !ev.CreatedAt.Equal(added[3].CreatedAt) {
				t.Fatal("removal events were not written together")
			}
		}
		if ev := added[3]; ev.Type != users.EventRemoved || ev.AggregateID != victim {
			t.Fatalf("last event %s on %s; want %s on the user", ev.Type, ev.AggregateID, users.EventRemoved)
		}
		usrWantWriteJSON(t, "remove", r, added[3])
		for table, col := range map[string]string{"users": "id", "password_history": "user_id", "user_metadata": "user_id",
			"org_members": "user_id", "instance_members": "user_id", "machine_keys": "user_id"} {
			var n int
			if err := e.DB.Get(ctx, &n, `SELECT COUNT(*) FROM `+table+` WHERE `+col+` = ?`, victim); err != nil || n != 0 {
				t.Fatalf("%s keeps %d rows of the removed user (%v)", table, n, err)
			}
		}
		usrRefused(t, e, "removed user's token", "GET", "/management/v1/users/"+foreign, victimToken, otherOrg, nil, 401, 16)
		usrRefused(t, e, "get removed", "GET", "/management/v1/users/"+victim, e.AdminToken, "", nil, 404, 5)
		usrRefused(t, e, "remove again", "DELETE", "/management/v1/users/"+victim, e.AdminToken, "", nil, 404, 5)
		usrRefused(t, e, "other org's user", "DELETE", "/management/v1/users/"+foreign, e.AdminToken, "", nil, 404, 5)
		usrRefused(t, e, "no role", "DELETE", "/management/v1/users/"+foreign, e.Intro.Mint(e.SeedUser(e.OrgID, "plain")), "", nil, 403, 7)

		// The user name is free again, and the organizations stay writable
		// (their versions moved with the membership events).
		again := e.REST("POST", "/management/v1/users/human", e.AdminToken, "", map[string]any{
			"userName": "victim", "profile": map[string]any{"firstName": "V", "lastName": "Ictim"},
			"email": map[string]any{"email": "victim@example.com"},
		})
		if again.Status != 200 {
			t.Fatalf("re-adding the user name: %d %s", again.Status, again.Body)
		}
		e.SeedMember(otherOrg, foreign, orgs.RoleOrgUserManager)

		// A machine user with key and secret, removed over gRPC.
		c := e.Client("grpc", e.AdminToken, "")
		m, err := c.AddMachineUser(ctx, &managementv1.AddMachineUserRequest{UserName: "robot", Name: "Robot"})
		if err != nil {
			t.Fatal(err)
		}
		mid := m.GetUserId()
		key, err := c.AddMachineKey(ctx, &managementv1.AddMachineKeyRequest{UserId: mid, Type: managementv1.KeyType_KEY_TYPE_JSON})
		if err != nil {
			t.Fatal(err)
		}
		sec, err := c.GenerateMachineSecret(ctx, &managementv1.GenerateMachineSecretRequest{UserId: mid})
		if err != nil {
			t.Fatal(err)
		}
		rm, err := c.RemoveUser(ctx, &managementv1.RemoveUserRequest{Id: mid})
		if err != nil {
			t.Fatalf("RemoveUser over gRPC: %v", err)
		}
		usrWantWrite(t, "remove machine", rm.GetDetails(), usrLast(t, e, mid))
		q := &users.Queries{DB: e.DB}
		if _, err := q.MachineKey(ctx, key.GetKeyId()); err == nil {
			t.Fatal("key of the removed machine user still found")
		}
		if _, err := q.ByClientID(ctx, sec.GetClientId()); err == nil {
			t.Fatal("client id of the removed machine user still found")
		}
		if _, err := c.RemoveUser(ctx, &managementv1.RemoveUserRequest{Id: mid}); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("removing twice: %v; want NotFound", err)
		}
		if _, err := c.AddMachineUser(ctx, &managementv1.AddMachineUserRequest{UserName: "robot", Name: "Robot 2"}); err != nil {
			t.Fatalf("re-adding the machine user name: %v", err)
		}

		e.Restart()
		usrRefused(t, e, "removed user after restart", "GET", "/management/v1/users/"+victim, e.AdminToken, "", nil, 404, 5)
		if r := e.REST("GET", "/management/v1/users/"+again.JSON["userId"].(string), e.AdminToken, "", nil); r.Status != 200 {
			t.Fatalf("re-added user after restart: %d", r.Status)
		}
	})
}
