package authz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

// fakeTokens answers introspection from a table.
type fakeTokens map[string]*tokensv1.IntrospectResponse

func (f fakeTokens) Introspect(_ context.Context, req *tokensv1.IntrospectRequest) (*tokensv1.IntrospectResponse, error) {
	if r, ok := f[req.GetToken()]; ok {
		return r, nil
	}
	return &tokensv1.IntrospectResponse{}, nil
}

// Without a revocation list the checker introspects every token.
func (f fakeTokens) CheckRevoked(context.Context, *tokensv1.CheckRevokedRequest) (*tokensv1.CheckRevokedResponse, error) {
	return &tokensv1.CheckRevokedResponse{}, nil
}

func (f fakeTokens) ListRevocations(context.Context, *tokensv1.ListRevocationsRequest) (*tokensv1.ListRevocationsResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, nil)
}

func (f fakeTokens) GetKeySet(context.Context, *tokensv1.GetKeySetRequest) (*tokensv1.GetKeySetResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, nil)
}

// fakeDirectory knows users (id -> org), which are inactive, and roles.
type fakeDirectory struct {
	orgs     map[string]string
	inactive map[string]bool
	cutAt    map[string]time.Time
	roles    map[string]map[string][]string // user -> org -> roles
	// asked counts role look-ups: OrgNone must make none.
	asked int
}

func (d *fakeDirectory) Principal(_ context.Context, userID string) (Principal, error) {
	org, ok := d.orgs[userID]
	if !ok || d.inactive[userID] {
		return Principal{}, fmt.Errorf("user %s: %w", userID, db.ErrNotFound)
	}
	p := Principal{OrgID: org}
	if t, ok := d.cutAt[userID]; ok {
		p.CutAt = &t
	}
	return p, nil
}

func (d *fakeDirectory) OrgExists(_ context.Context, orgID string) (bool, error) {
	return orgID == "org-a" || orgID == "org-b", nil
}

func (d *fakeDirectory) Roles(_ context.Context, userID, orgID string) ([]string, error) {
	d.asked++
	return d.roles[userID][orgID], nil
}

func (d *fakeDirectory) UserOrg(_ context.Context, userID string) (string, error) {
	return d.orgs[userID], nil
}

func (d *fakeDirectory) Memberships(context.Context, string) ([]Membership, error) { return nil, nil }

func (d *fakeDirectory) AdminApp(context.Context, string, string) (bool, error) { return false, nil }

func (d *fakeDirectory) ManagementClient(context.Context, string, string) (bool, error) {
	return true, nil
}

// TestOrgNone: a procedure listing across organizations authenticates the
// caller exactly as every other procedure does, but needs no role and acts
// on no organization, whatever x-service-orgid says.
func TestOrgNone(t *testing.T) {
	now := time.Now()
	active := func(sub string, aud ...string) *tokensv1.IntrospectResponse {
		if aud == nil {
			aud = []string{Audience}
		}
		return &tokensv1.IntrospectResponse{Active: true, Subject: sub, Audience: aud,
			IssuedAt: timestamppb.New(now.Add(-time.Minute)), ExpiresAt: timestamppb.New(now.Add(time.Hour))}
	}
	tokens := fakeTokens{
		"plain":        active("plain"),
		"owner":        active("owner"),
		"inactiveUser": active("gone"),
		"cut":          active("cut"),
		"otherAud":     active("plain", "some-project"),
		// Expired, revoked or unknown tokens introspect as inactive.
		"expired": {Active: false, Subject: "plain", Audience: []string{Audience}},
	}
	dir := &fakeDirectory{
		orgs:     map[string]string{"plain": "org-a", "owner": "org-a", "gone": "org-a", "cut": "org-a"},
		inactive: map[string]bool{"gone": true},
		cutAt:    map[string]time.Time{"cut": now},
		roles:    map[string]map[string][]string{"owner": {"org-a": {"ORG_OWNER"}}},
	}
	const proc = "/test/ListAcross"
	rules := map[string]Rule{
		proc:             {Permission: Authenticated, Org: OrgNone},
		"/test/Wrong":    {Permission: OrgOwner, Org: OrgNone},
		"/test/OrgScope": {Permission: Authenticated, Org: OrgFromHeader},
	}
	i := NewInterceptor(accesstoken.NewRemote(tokens, accesstoken.RemoteOptions{Audience: Audience}), dir, rules, logging.Discard())
	ctx := context.Background()

	for _, header := range []string{"", "org-a", "org-b", "no-such-org"} {
		c, _, err := i.authorize(ctx, proc, "Bearer plain", header, nil)
		if err != nil {
			t.Fatalf("user without roles, x-service-orgid %q: %v; want allowed", header, err)
		}
		if c.UserID != "plain" || c.UserOrgID != "org-a" || c.OrgID != "" || len(c.Roles) != 0 || c.IsIAMOwner() {
			t.Fatalf("x-service-orgid %q: caller %+v; want the user, no target organization, no roles", header, c)
		}
	}
	if dir.asked != 0 {
		t.Fatalf("%d role look-ups; want none for OrgNone", dir.asked)
	}

	for _, tc := range []struct{ name, authz string }{
		{"no token", ""},
		{"not Bearer", "Basic cGxhaW46eA=="},
		{"expired or revoked token", "Bearer expired"},
		{"unknown token", "Bearer nonsense"},
		{"token without the management audience", "Bearer otherAud"},
		{"inactive user", "Bearer inactiveUser"},
		{"token issued before the user's cut-off", "Bearer cut"},
	} {
		if _, _, err := i.authorize(ctx, proc, tc.authz, "org-a", nil); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s: %v; want Unauthenticated", tc.name, err)
		}
	}

	// Fail closed: a role cannot be held without an organization, and
	// Authenticated grants nothing where an organization is the target.
	for _, tc := range []struct{ proc, token string }{{"/test/Wrong", "owner"}, {"/test/OrgScope", "owner"}, {"/test/OrgScope", "plain"}} {
		_, _, err := i.authorize(ctx, tc.proc, "Bearer "+tc.token, "", nil)
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s by %s: %v; want PermissionDenied", tc.proc, tc.token, err)
		}
	}
	if _, _, err := i.authorize(ctx, "/test/Unlisted", "Bearer plain", "", nil); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("procedure without a rule: %v; want PermissionDenied", err)
	}
}
