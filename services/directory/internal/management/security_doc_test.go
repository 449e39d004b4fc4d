package management_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/management"
)

// securityDoc is the repository's SECURITY.md.
const securityDoc = "../../../../SECURITY.md"

// rulesTable renders management.Rules as SECURITY.md shows them.
func rulesTable() string {
	perm := map[authz.Permission]string{
		authz.Authenticated: "none (lists only where the caller holds a role)", authz.AnyRole: "any role", authz.UserManager: "ORG_USER_MANAGER", authz.OrgOwner: "ORG_OWNER", authz.IAMOwner: "IAM_OWNER",
	}
	rules := management.Rules()
	names := make([]string, 0, len(rules))
	for p := range rules {
		names = append(names, p)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| RPC | least role | organization | changes user (dominance) | grants roles | changes app (IAM_OWNER's if an admin client) |\n|---|---|---|---|---|---|\n")
	for _, p := range names {
		r := rules[p]
		org := "x-service-orgid, else the caller's"
		switch r.Org {
		case authz.OrgNew:
			org = "creates one"
		case authz.OrgNone:
			org = "none (x-service-orgid ignored)"
		}
		target := "—"
		switch {
		case r.TargetUser != "" && r.Members && r.OwnUsers:
			target = "`" + r.TargetUser + "` (this organization's user; any organization's for IAM_OWNER)"
		case r.TargetUser != "" && r.Members:
			target = "`" + r.TargetUser + "` (any organization's user)"
		case r.TargetUser != "":
			target = "`" + r.TargetUser + "`"
		}
		least := perm[r.Permission]
		if r.Self {
			least = "none for the user itself, else " + least
		}
		grant := "—"
		if r.GrantRoles != "" {
			grant = "`" + r.GrantRoles + "`"
		}
		app := "—"
		if r.AdminApp != "" {
			app = "`" + r.AdminApp + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", p[strings.LastIndex(p, "/")+1:], least, org, target, grant, app)
	}
	return b.String()
}

// TestSecurityDocShowsTheRules: SECURITY.md's table is the code's table
// (GATEHOUSE_WRITE_SECURITY_TABLE=1 prints the current one).
func TestSecurityDocShowsTheRules(t *testing.T) {
	want := rulesTable()
	if os.Getenv("GATEHOUSE_WRITE_SECURITY_TABLE") != "" {
		fmt.Print(want)
		return
	}
	doc, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), want) {
		t.Errorf("SECURITY.md does not show the authorization table of management.Rules; it should contain:\n%s", want)
	}
}
