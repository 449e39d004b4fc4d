package management_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/management"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// The authorization matrix: every management RPC, called by every kind of
// caller, against targets in the caller's organization, in another
// organization (by x-service-orgid, and by ids of the other organization's
// objects in the path or body) and against a privileged user, over REST,
// Connect, gRPC and gRPC-web. The expected outcome is computed from
// management.Rules, the authorization table, so an RPC added to the API is
// tested here as soon as it has a rule (and TestEveryRPCHasARule fails
// until it has one).

// azCaller is one kind of caller.
type azCaller struct {
	name  string
	token string
	// userID is the caller's own user (the target of azSelf).
	userID string
	// unauthenticated callers get 401 on every RPC.
	unauthenticated bool
	iam             bool
	roles           map[string][]string // organization -> roles there
	// foreign: the caller's own organization is B, so calls aimed at A
	// name A in x-service-orgid (the others rely on the default).
	foreign bool
}

// azTarget says where a call points.
type azTarget string

const (
	azOwn        azTarget = "own organization"
	azHeader     azTarget = "other organization by x-service-orgid"
	azForeignIDs azTarget = "other organization's ids in path and body"
	azPrivileged azTarget = "the IAM owner as target user"
	azAdminApp   azTarget = "an admin client as target app"
	azSelf       azTarget = "the caller itself as target user"
)

// azIDs are the objects a request names.
type azIDs struct{ user, machine, project, app, adminApp, idp, org, otherOrg string }

// azFixture is the seeded instance.
type azFixture struct {
	e       *mgmttest.Env
	a, b    azIDs // ids of organization A (the callers') and B
	callers []azCaller
	n       int // unique names
}

func azSetup(t *testing.T, e *mgmttest.Env) *azFixture {
	t.Helper()
	f := &azFixture{e: e}
	orgA := e.OrgID
	orgB, stranger := e.SeedOrg("Other Corp", "stranger")
	owner, manager, plain := e.SeedUser(orgA, "owner"), e.SeedUser(orgA, "manager"), e.SeedUser(orgA, "plain")
	e.SeedMember(orgA, owner, "ORG_OWNER")
	e.SeedMember(orgA, manager, "ORG_USER_MANAGER")
	objects := func(org, other string) azIDs {
		ids := azIDs{org: org, otherOrg: other, user: e.SeedUser(org, "target-"+org)}
		must := func(method, path string, body any) map[string]any {
			r := e.REST(method, path, e.AdminToken, org, body)
			if r.Status != 200 {
				t.Fatalf("seed %s %s: %d %s", method, path, r.Status, r.Body)
			}
			return r.JSON
		}
		ids.machine = must("POST", "/management/v1/users/machine", map[string]any{"userName": "robot-" + org, "name": "Robot"})["userId"].(string)
		ids.project = must("POST", "/management/v1/projects", map[string]any{"name": "Project " + org})["id"].(string)
		app := func(name string) string {
			return must("POST", "/management/v1/projects/"+ids.project+"/apps/oidc", map[string]any{"name": name,
				"redirectUris": []string{"https://rp.example/cb"}, "responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"},
				"grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE"}, "appType": "OIDC_APP_TYPE_WEB",
				"authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"})["appId"].(string)
		}
		ids.app, ids.adminApp = app("web"), app("admin")
		must("POST", "/management/v1/projects/"+ids.project+"/apps/"+ids.adminApp+"/_admin_client", map[string]any{"adminClient": true})
		ids.idp = must("POST", "/management/v1/idps/oidc", map[string]any{"name": "IdP", "clientId": "c", "clientSecret": "s",
			"issuer": "https://idp.example"})["idpId"].(string)
		return ids
	}
	f.a, f.b = objects(orgA, orgB), objects(orgB, orgA)

	i := e.Intro
	revoked := i.Mint(owner)
	i.Revoke(revoked)
	all := []string{"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"}
	f.callers = []azCaller{
		{name: "IAM_OWNER", token: e.AdminToken, userID: e.AdminID, iam: true, roles: map[string][]string{orgA: all, orgB: all}},
		{name: "ORG_OWNER", token: i.Mint(owner), userID: owner, roles: map[string][]string{orgA: {"ORG_OWNER"}}},
		{name: "ORG_USER_MANAGER", token: i.Mint(manager), userID: manager, roles: map[string][]string{orgA: {"ORG_USER_MANAGER"}}},
		// The owner of organization B acts in A: it holds no role there.
		{name: "member of another org", token: i.Mint(stranger), userID: stranger, roles: map[string][]string{orgB: {"ORG_OWNER"}}, foreign: true},
		{name: "user without roles", token: i.Mint(plain), userID: plain},
		{name: "ordinary app's token", userID: plain, token: i.MintWith(plain, []string{"some-client-id", f.a.project}, time.Hour), unauthenticated: true},
		{name: "token without the management audience", userID: owner, token: i.MintWith(owner, []string{"other-api"}, time.Hour), unauthenticated: true},
		{name: "expired token", userID: owner, token: i.MintWith(owner, []string{authz.Audience}, -time.Minute), unauthenticated: true},
		{name: "revoked token", userID: owner, token: revoked, unauthenticated: true},
	}
	return f
}

// azAllowed is the expectation of a call that authorization lets through:
// anything but 401 and 403 (the handler may still refuse the request).
const azAllowed = 0

// expect computes the status a call must get from the rule table.
func (f *azFixture) expect(c azCaller, rule authz.Rule, m protoreflect.MethodDescriptor, target azTarget) int {
	if c.unauthenticated {
		return http.StatusUnauthorized
	}
	if rule.Org == authz.OrgNone {
		return azAllowed // no role needed: the handler shows only what the caller's roles allow
	}
	if target == azSelf && !c.foreign {
		return azAllowed // its own factors, in its own organization: no role
	}
	org := f.a.org
	if target == azHeader {
		org = f.b.org
	}
	held := c.roles[org]
	if !azPermits(rule.Permission, held) {
		return http.StatusForbidden
	}
	switch target {
	case azForeignIDs:
		if rule.OwnUsers && !c.iam {
			return http.StatusNotFound // as for an unknown user
		}
		if !azNamesObject(m) || rule.Members || m.Name() == "AddProjectGrant" {
			// Memberships and grants name other organizations' users and
			// organizations by design; the rest find no such object.
			if m.Name() == "AddProjectGrant" {
				return http.StatusNotFound // B's project is not found in A
			}
			return azAllowed
		}
		return http.StatusNotFound
	case azPrivileged:
		if rule.TargetUser != "" && !c.iam {
			return http.StatusForbidden
		}
	case azAdminApp:
		if !c.iam {
			return http.StatusForbidden
		}
	}
	return azAllowed
}

func azPermits(p authz.Permission, roles []string) bool {
	need := map[authz.Permission][]string{
		authz.AnyRole:     {"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"},
		authz.UserManager: {"IAM_OWNER", "ORG_OWNER", "ORG_USER_MANAGER"},
		authz.OrgOwner:    {"IAM_OWNER", "ORG_OWNER"},
		authz.IAMOwner:    {"IAM_OWNER"},
	}[p]
	for _, r := range roles {
		for _, n := range need {
			if r == n {
				return true
			}
		}
	}
	return false
}

// azNamesObject reports whether the request names an existing object by id.
func azNamesObject(m protoreflect.MethodDescriptor) bool {
	for _, n := range []protoreflect.Name{"id", "user_id", "project_id", "idp_id", "app_id"} {
		if m.Input().Fields().ByName(n) != nil {
			return true
		}
	}
	return false
}

// request builds m's request with the matrix table's builder (TestMatrix's
// valid requests), naming the target's objects: organization A's, B's for
// azHeader and azForeignIDs, and the IAM owner as the user for
// azPrivileged.
func (f *azFixture) request(row mxRow, protocol string, target azTarget, self string) proto.Message {
	ids := f.a
	if target == azHeader || target == azForeignIDs {
		ids = f.b
	}
	user, machine, app := ids.user, ids.machine, ids.app
	if target == azPrivileged {
		user, machine = f.e.AdminID, f.e.AdminID
	}
	if target == azAdminApp {
		app = ids.adminApp
	}
	if target == azSelf {
		user = self
	}
	home := ids.otherOrg
	if target == azForeignIDs {
		home = f.b.org // another organization than the caller's, named in the body
	}
	f.n++
	run := &mxRun{e: f.e, proto: fmt.Sprintf("%s-%d", protocol, f.n), born: map[string]eventstore.Event{}, ids: map[string]string{
		"org": ids.org, "home": home, "ada": user, "grace": user, "robot": machine, "robotKey": "no-such-key",
		"project": ids.project, "web": app, "api": app, "apiClient": "no-such-client", "apiKey": "no-such-key",
		"idp": ids.idp, "grant": "no-such-grant", "receivedProject": "no-such-project", "receivedGrant": "no-such-grant", "policy": "", "security": "", "domain": "example.com", "k1": "k1", "k3": "k3",
		"ida": user, "ownDomain": "example.com", "generated": "example.org",
	}}
	return row.req(run)
}

// call sends req over protocol and returns the HTTP status (REST) or the
// status the Connect code maps to (0 for other codes).
func (f *azFixture) call(t *testing.T, protocol string, row mxRow, m protoreflect.MethodDescriptor, c azCaller, org string, req proto.Message) int {
	t.Helper()
	if protocol == "rest" {
		return f.rest(t, m, c.token, org, req)
	}
	_, err := row.call(context.Background(), f.e.Client(protocol, c.token, org), req)
	if err == nil {
		return http.StatusOK
	}
	return map[connect.Code]int{connect.CodeUnauthenticated: 401, connect.CodePermissionDenied: 403, connect.CodeNotFound: 404,
		connect.CodeInvalidArgument: 400, connect.CodeAlreadyExists: 409, connect.CodeAborted: 409}[connect.CodeOf(err)]
}

// rest sends req as a REST call (path variables from the request; the
// rest as the JSON body when the rule has one).
func (f *azFixture) rest(t *testing.T, m protoreflect.MethodDescriptor, token, org string, req proto.Message) int {
	t.Helper()
	verbPath, bodySel := mxHTTPRule(m)
	verb, path, _ := strings.Cut(verbPath, " ")
	body := proto.Clone(req).ProtoReflect()
	for strings.Contains(path, "{") {
		i := strings.Index(path, "{")
		j := strings.Index(path[i:], "}") + i
		fd := body.Descriptor().Fields().ByName(protoreflect.Name(path[i+1 : j]))
		v := body.Get(fd).String()
		body.Clear(fd)
		path = path[:i] + url.PathEscape(v) + path[j+1:]
	}
	var payload any
	if bodySel == "*" {
		raw, err := protojson.Marshal(body.Interface())
		if err != nil {
			t.Fatal(err)
		}
		payload = string(raw)
	}
	return f.e.REST(verb, path, token, org, payload).Status
}

func TestAuthorizationMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the full authorization matrix runs without -short")
	}
	rules := management.Rules()
	e := mgmttest.Start(t, db.SQLite)
	f := azSetup(t, e)
	methods := mxService().Methods()
	rows := map[protoreflect.Name]mxRow{}
	for _, r := range mxTable() {
		rows[protoreflect.Name(r.rpc)] = r
	}
	protocols := append([]string{"rest"}, mgmttest.Protocols...)
	calls := 0
	for i := range methods.Len() {
		m := methods.Get(i)
		rule, ok := rules["/"+string(m.Parent().FullName())+"/"+string(m.Name())]
		if !ok {
			t.Errorf("%s has no rule", m.Name())
			continue
		}
		targets := []azTarget{azOwn, azHeader}
		if azNamesObject(m) || m.Name() == "AddProjectGrant" {
			targets = append(targets, azForeignIDs)
		}
		if rule.TargetUser != "" {
			targets = append(targets, azPrivileged)
		}
		if rule.AdminApp != "" {
			targets = append(targets, azAdminApp)
		}
		if rule.Self {
			targets = append(targets, azSelf)
		}
		for _, target := range targets {
			for _, c := range f.callers {
				want := f.expect(c, rule, m, target)
				if want == azAllowed && (target == azPrivileged || target == azAdminApp) {
					continue // an IAM owner changing itself or an admin client proves nothing here
				}
				org := ""
				switch {
				case target == azHeader:
					org = f.b.org
				case c.foreign:
					org = f.a.org
				}
				for _, p := range protocols {
					got := f.call(t, p, rows[m.Name()], m, c, org, f.request(rows[m.Name()], p, target, c.userID))
					calls++
					if (want == azAllowed && (got == 401 || got == 403)) || (want != azAllowed && got != want) {
						wantText := fmt.Sprint(want)
						if want == azAllowed {
							wantText = "neither 401 nor 403"
						}
						t.Errorf("%s by %s, %s, over %s: %d; want %s", m.Name(), c.name, target, p, got, wantText)
					}
				}
			}
		}
	}
	t.Logf("%d calls: %d RPCs × %d callers × up to 5 targets × %d protocols", calls, methods.Len(), len(f.callers), len(protocols))
}
