package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/cli/internal/contexts"
)

// TestLoginContextStoresThereWithoutSwitching: login --context X signs in
// the context X, creating it, and the current context stays current;
// --name switches.
func TestLoginContextStoresThereWithoutSwitching(t *testing.T) {
	f := newFakeIssuer(t)
	g := newGatehouse(t)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	alice, bob := keyFile(t, "u-alice"), keyFile(t, "u-bob")

	g.ok("login", "--issuer", f.srv.URL, "--key-file", alice)
	_, msg, _ := g.run("login", "--issuer", f.srv.URL, "--key-file", bob, "--context", "ci")
	if !strings.Contains(msg, `context "ci"`) || !strings.Contains(msg, `still "`+host+`"`) {
		t.Fatalf("login --context ci said %q; want that %s is still current", msg, host)
	}
	cf := g.contexts()
	all, _ := cf["contexts"].(map[string]any)
	if cf["current"] != host || all["ci"] == nil || all[host] == nil {
		t.Fatalf("contexts file %v; want ci added and %s still current", cf, host)
	}
	if who := g.json("whoami"); who["userId"] != "u-alice" || who["context"] != host {
		t.Fatalf("whoami: %v; want alice in %s", who, host)
	}
	if who := g.json("whoami", "--context", "ci"); who["userId"] != "u-bob" || who["context"] != "ci" {
		t.Fatalf("whoami --context ci: %v; want bob", who)
	}
	// The environment's context is --context's default, with the same rule.
	t.Setenv("GATEHOUSE_CONTEXT", "ci2")
	g.ok("login", "--issuer", f.srv.URL, "--key-file", bob)
	t.Setenv("GATEHOUSE_CONTEXT", "")
	if cf := g.contexts(); cf["current"] != host || cf["contexts"].(map[string]any)["ci2"] == nil {
		t.Fatalf("login with GATEHOUSE_CONTEXT=ci2: %v", cf)
	}

	// --name switches; both naming different contexts is refused.
	g.ok("login", "--issuer", f.srv.URL, "--key-file", bob, "--name", "ci")
	if cf := g.contexts(); cf["current"] != "ci" {
		t.Fatalf("login --name ci: current %v", cf["current"])
	}
	g.fail([]string{"error: --name a and --context b"}, "login", "--issuer", f.srv.URL, "--key-file", bob, "--name", "a", "--context", "b")

	// With no current context, the new one becomes current.
	first := newGatehouse(t)
	first.ok("login", "--issuer", f.srv.URL, "--key-file", bob, "--context", "ci")
	if who := first.json("whoami"); who["context"] != "ci" || who["userId"] != "u-bob" {
		t.Fatalf("first login --context ci, then whoami: %v", who)
	}
}

// TestWhoamiWithoutRoles: a user without roles is shown (its id, name
// and organization) with the count of organizations it holds roles in,
// 0, and a note; exit 0.
func TestWhoamiWithoutRoles(t *testing.T) {
	f := newFakeIssuer(t)
	g := newGatehouse(t)
	g.ok("login", "--issuer", f.srv.URL, "--key-file", keyFile(t, "u-bob"))
	out, errOut, code := g.run("whoami", "-o", "json")
	if code != 0 {
		t.Fatalf("whoami without roles: exit %d, %s", code, errOut)
	}
	var who map[string]any
	if err := json.Unmarshal([]byte(out), &who); err != nil {
		t.Fatal(err)
	}
	if who["userId"] != "u-bob" || who["name"] != "bob@acme.example" || who["orgId"] != "org-1" || who["orgName"] != "Acme" || who["orgsWithRoles"] != 0.0 {
		t.Fatalf("whoami: %v", who)
	}
	if !strings.Contains(errOut, "u-bob holds no roles") {
		t.Fatalf("whoami said %q; want a note that it holds no roles", errOut)
	}
	if table := g.ok("whoami", "-o", "table"); !strings.Contains(table, "ORGS WITH ROLES") || !strings.Contains(table, "Acme") {
		t.Fatalf("whoami -o table:\n%s", table)
	}

	// A user with a role: no note.
	g.ok("login", "--issuer", f.srv.URL, "--key-file", keyFile(t, "u-alice"))
	out, errOut, _ = g.run("whoami", "-o", "json")
	if err := json.Unmarshal([]byte(out), &who); err != nil || who["orgsWithRoles"] != 1.0 || who["orgName"] != "Acme" || errOut != "" {
		t.Fatalf("whoami with a role: %v %v, stderr %q", who, err, errOut)
	}

	// A session from before the CLI asked for the resourceowner scope: the
	// organization comes from GetMyOrg, and stays unknown without a role.
	for user, org := range map[string]any{"u-alice": "Acme", "u-bob": nil} {
		old := newGatehouse(t)
		s := contexts.Store{Path: old.config}
		cf := &contexts.File{Current: "old", Contexts: map[string]*contexts.Context{"old": {
			Issuer: f.srv.URL, Kind: contexts.KindKey, AccessToken: f.issue(user, "openid", "profile"), Expiry: time.Now().Add(time.Hour),
		}}}
		if err := s.Save(cf); err != nil {
			t.Fatal(err)
		}
		if who := old.json("whoami"); who["userId"] != user || who["orgName"] != org {
			t.Fatalf("whoami of %s with an old token: %v; want org %v", user, who, org)
		}
	}
}

// TestLogoutEndsTheSession: after logout the next command fails with "not
// logged in" instead of signing in again with the kept key; the key file
// itself stays.
func TestLogoutEndsTheSession(t *testing.T) {
	f := newFakeIssuer(t)
	g := newGatehouse(t)
	kf := keyFile(t, "u-alice")
	before, _ := os.ReadFile(kf)
	g.ok("login", "--issuer", f.srv.URL, "--key-file", kf)
	token := strings.TrimSpace(g.ok("token"))

	g.ok("logout")
	if revoked := f.revokedTokens(); !slices.Contains(revoked, token) {
		t.Fatalf("logout revoked %v; want %s", revoked, token)
	}
	name := strings.TrimPrefix(f.srv.URL, "http://")
	entry, _ := g.contexts()["contexts"].(map[string]any)[name].(map[string]any)
	if entry == nil || entry["issuer"] != f.srv.URL || entry["keyFile"] != nil || entry["accessToken"] != nil {
		t.Fatalf("the context after logout: %v; want the issuer kept, the key and tokens gone", entry)
	}
	if after, err := os.ReadFile(kf); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the key file after logout: %v; want it untouched", err)
	}

	issued := f.issuedCount()
	for _, args := range [][]string{{"whoami"}, {"token"}, {"orgs", "show"}} {
		g.fail([]string{"error: context " + name + ": not logged in; run gatehouse login --context " + name, "--key-file"}, args...)
	}
	if f.issuedCount() != issued {
		t.Fatal("a command after logout signed in again")
	}
	list := g.json("context", "list")
	if rows, _ := list["contexts"].([]any); len(rows) != 1 || rows[0].(map[string]any)["signedIn"] != false {
		t.Fatalf("context list after logout: %v", list)
	}

	// Signing in again works, and logout twice is harmless.
	g.ok("login", "--issuer", f.srv.URL, "--key-file", kf, "--context", name)
	if who := g.json("whoami"); who["userId"] != "u-alice" {
		t.Fatalf("whoami after a new login: %v", who)
	}
	g.ok("logout")
	g.ok("logout")
}
