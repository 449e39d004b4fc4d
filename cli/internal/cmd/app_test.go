package cmd

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestMistypedCommandFails: an unknown sub-command, at any level, is an
// error naming it with cobra's suggestion, not the group's help and exit 0.
func TestMistypedCommandFails(t *testing.T) {
	g := newGatehouse(t)
	for _, tc := range []struct{ args, want []string }{
		{[]string{"users", "lst"}, []string{`error: unknown command "lst" for "gatehouse users"`, "did you mean list?"}},
		{[]string{"users", "keys", "ad", "123"}, []string{`error: unknown command "ad" for "gatehouse users keys"`, "did you mean add?"}},
		{[]string{"context", "swtich"}, []string{`error: unknown command "swtich" for "gatehouse context"`}},
		{[]string{"completion", "bsh"}, []string{`error: unknown command "bsh" for "gatehouse completion"`, "did you mean bash, fish or zsh?"}},
		{[]string{"usrs"}, []string{`error: unknown command "usrs" for "gatehouse"`, "did you mean users?"}},
	} {
		g.fail(tc.want, tc.args...)
	}
	// A group on its own still shows its help.
	for _, args := range [][]string{{}, {"users"}, {"users", "keys"}} {
		if out := g.ok(args...); !strings.Contains(out, "[command] --help") {
			t.Fatalf("gatehouse %v: %q; want the help", args, out)
		}
	}
}

// TestVersion: gatehouse --version and gatehouse version print the
// module version of the build.
func TestVersion(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information")
	}
	g := newGatehouse(t)
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out := g.ok(args...)
		if !strings.HasPrefix(out, "gatehouse "+bi.Main.Version) || strings.Count(out, "\n") != 1 {
			t.Fatalf("gatehouse %v: %q; want one line with %q", args, out, bi.Main.Version)
		}
	}
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.time", Value: "2026-03-01T10:00:00Z"},
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got := versionOf(vcs); got != "gatehouse v1.4.0 (revision 0123abcd, 2026-03-01T10:00:00Z, modified)" {
		t.Fatalf("with VCS information: %q", got)
	}
	if got := versionOf(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}); got != "gatehouse (devel)" {
		t.Fatalf("without VCS information: %q", got)
	}
}

// TestJSONPathThatMatchesNothing: -o jsonpath= with a path the output
// does not have prints nothing and fails; a field with a zero value
// (which protojson leaves out) still prints.
func TestJSONPathThatMatchesNothing(t *testing.T) {
	f := newFakeIssuer(t)
	g := newGatehouse(t)
	g.fail([]string{`error: -o jsonpath={.nope}: matches nothing: no key "nope" in the output (it has contexts)`}, "context", "list", "-o", "jsonpath={.nope}")

	g.ok("login", "--issuer", f.srv.URL, "--key-file", keyFile(t, "u-alice"))
	if out := g.ok("whoami", "-o", "jsonpath={.userId}"); out != "u-alice\n" {
		t.Fatalf("jsonpath={.userId}: %q", out)
	}
	g.fail([]string{`-o jsonpath={.userid}: matches nothing: no key "userid" in the output`, "userId"}, "whoami", "-o", "jsonpath={.userid}")
	if out := g.ok("orgs", "show", "-o", "jsonpath={.org.name}"); out != "Acme\n" {
		t.Fatalf("jsonpath={.org.name}: %q", out)
	}
	g.fail([]string{`no key "nmae" in .org`}, "orgs", "show", "-o", "jsonpath={.org.nmae}")
	g.fail([]string{"matches nothing: .org.details is null"}, "orgs", "show", "-o", "jsonpath={.org.details.sequence}")
	g.fail([]string{"matches nothing: .org.name is a value"}, "orgs", "show", "-o", "jsonpath={.org.name.first}")
	// Unset, so absent from the JSON, but a field of the response.
	if out := g.ok("orgs", "show", "-o", "jsonpath={.org.primaryDomain}"); out != "\n" {
		t.Fatalf("jsonpath={.org.primaryDomain} (empty): %q", out)
	}
	if out := g.ok("orgs", "show", "-o", "jsonpath={.org.state}"); out != "ORG_STATE_UNSPECIFIED\n" {
		t.Fatalf("jsonpath={.org.state} (zero): %q", out)
	}
}
