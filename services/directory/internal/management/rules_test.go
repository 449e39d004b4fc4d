package management_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	mv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/management"
)

// TestEveryRPCHasARule: a procedure without a rule would be refused by
// authz, so a new RPC fails here first; every field a rule names exists in
// the request with the right shape, so dominance cannot silently miss.
func TestEveryRPCHasARule(t *testing.T) {
	rules := management.Rules()
	sd := mv1.File_gatehouse_management_v1_management_proto.Services().ByName("ManagementService")
	methods := sd.Methods()
	if len(rules) != methods.Len() {
		t.Errorf("%d rules for %d procedures", len(rules), methods.Len())
	}
	for i := range methods.Len() {
		m := methods.Get(i)
		proc := "/" + string(sd.FullName()) + "/" + string(m.Name())
		rule, ok := rules[proc]
		if !ok {
			t.Errorf("%s has no authorization rule", m.Name())
			continue
		}
		switch rule.Org {
		case authz.OrgFromHeader, authz.OrgNew:
			if rule.Permission < authz.AnyRole || rule.Permission > authz.IAMOwner {
				t.Errorf("%s: rule %+v needs a role", m.Name(), rule)
			}
		case authz.OrgNone:
			// No organization, so no role to hold and no user to dominate:
			// the handler filters by the caller's memberships.
			if rule.Permission != authz.Authenticated || rule.TargetUser != "" || rule.GrantRoles != "" {
				t.Errorf("%s: rule %+v acts on no organization but asks for roles or dominance", m.Name(), rule)
			}
			if !strings.HasPrefix(string(m.Name()), "List") {
				t.Errorf("%s: only lists (filtered by the caller's memberships) may act on no organization", m.Name())
			}
		default:
			t.Errorf("%s: incomplete rule %+v", m.Name(), rule)
		}
		for _, f := range []struct {
			name string
			list bool
		}{{rule.TargetUser, false}, {rule.GrantRoles, true}, {rule.AdminApp, false}} {
			if f.name == "" {
				continue
			}
			fd := m.Input().Fields().ByName(protoreflect.Name(f.name))
			if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() != f.list {
				t.Errorf("%s: rule names field %q, which %s has not as a %s", m.Name(), f.name, m.Input().Name(),
					map[bool]string{true: "repeated string", false: "string"}[f.list])
			}
		}
	}
}

// TestRulesGuardUsers cross-checks the table against the API's shape, so a
// new RPC cannot slip in without role dominance: every RPC that changes an
// existing user (its request names one by user_id, or by id on a user
// path) must name that field as TargetUser, every RPC that grants roles
// must name them as GrantRoles, and every RPC that changes an app (by
// app_id) must name it as AdminApp.
func TestRulesGuardUsers(t *testing.T) {
	rules := management.Rules()
	sd := mv1.File_gatehouse_management_v1_management_proto.Services().ByName("ManagementService")
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		name := string(m.Name())
		rule := rules["/"+string(sd.FullName())+"/"+name]
		read := strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List")
		verbPath, _ := mxHTTPRule(m)
		userField := ""
		switch {
		case m.Input().Fields().ByName("user_id") != nil:
			userField = "user_id"
		case m.Input().Fields().ByName("id") != nil && strings.Contains(verbPath, "/users/{id}"):
			userField = "id"
		}
		if userField != "" && !read && rule.TargetUser != userField {
			t.Errorf("%s changes the user named by %s but its rule has TargetUser %q", name, userField, rule.TargetUser)
		}
		if m.Input().Fields().ByName("roles") != nil && rule.GrantRoles != "roles" {
			t.Errorf("%s grants roles but its rule has GrantRoles %q", name, rule.GrantRoles)
		}
		// An RPC that changes an app guards admin clients, unless it needs
		// an IAM owner anyway.
		if m.Input().Fields().ByName("app_id") != nil && !read && rule.Permission != authz.IAMOwner && rule.AdminApp != "app_id" {
			t.Errorf("%s changes the app named by app_id but its rule has AdminApp %q", name, rule.AdminApp)
		}
		if rule.OwnUsers && rule.TargetUser == "" {
			t.Errorf("%s: OwnUsers without TargetUser guards nothing", name)
		}
	}
}
