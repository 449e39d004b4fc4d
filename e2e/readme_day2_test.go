package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// readmeBlock returns the shell block that follows <!-- day2:NAME in
// README.md.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- day2:" + name + "\\b[^>]*-->\\s*```sh\\n(.*?)```")
	m := re.FindSubmatch(raw)
	if m == nil {
		t.Fatalf("README.md has no block day2:%s", name)
	}
	return string(m[1])
}

// TestReadmeDay2Operations runs the README's "Day-2 operations" examples
// as written, with the built gatehouse on PATH, against an embedded
// server, then its backup and restore steps.
func TestReadmeDay2Operations(t *testing.T) {
	bin := gatehouseBinary(t)
	work := t.TempDir()
	data := filepath.Join(work, "data")
	addr := freeAddr(t)
	issuer := "http://" + addr
	p := startProc(t, config.RoleEdge, map[string]string{"GATEHOUSE_DATA_DIR": data, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer})
	env := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "HOME=" + work, "XDG_CONFIG_HOME=" + filepath.Join(work, "config"),
		"ISSUER=" + issuer, "GOOGLE_CLIENT_ID=google-client", "GOOGLE_CLIENT_SECRET=google-s3cret"}
	sh := func(block string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README block failed: %v\n%s\n--- block:\n%s", err, out, block)
		}
		return string(out)
	}

	// The first steps `make run` prints come first (they create acme).
	repo, _ := filepath.Abs("..")
	sh(`gatehouse login --issuer "$ISSUER" --key-file data/bootstrap-admin-key.json
gatehouse orgs list
gatehouse apply -f ` + filepath.Join(repo, "examples", "acme.yaml") + ` --secrets-out acme-secrets.yaml`)
	out := sh(readmeBlock(t, "operations"))
	if !contains(out, `"create": 0`, `"update": 0`, `"unchanged": 7`) {
		t.Fatalf("the export did not apply unchanged:\n%s", out)
	}
	front := sh(readmeBlock(t, "frontchannel"))
	if !contains(front, `"user_code":"`, `"verification_uri":"`+issuer+`/device"`, `"interval":5`,
		`"request_uri":"urn:ietf:params:oauth:request_uri:`, `"expires_in":60`) {
		t.Fatalf("the device and PAR examples answered:\n%s", front)
	}
	if tx := sh(readmeBlock(t, "tokenexchange")); !contains(tx, `"scope":"openid"`, `"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"`) {
		t.Fatalf("the token exchange example answered:\n%s", tx)
	}
	web, _ := os.ReadFile(filepath.Join(work, "web-app.yaml"))
	if !contains(string(web), "clientId:", "clientSecret:") {
		t.Fatalf("web-app.yaml:\n%s", web)
	}
	if st, err := os.Stat(filepath.Join(work, "ci-key.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ci-key.json: %v", err)
	}
	exported, _ := os.ReadFile(filepath.Join(work, "globex.yaml"))
	if !contains(string(exported), "kind: OIDCApp", "name: web", "userName: alice", "userName: ci", "kind: OIDCIdP", "roles:") || strings.Contains(string(exported), "google-s3cret") {
		t.Fatalf("globex.yaml:\n%s", exported)
	}

	// Backup with the server stopped, restore into a new directory, start
	// on it: the organization is there and the bootstrap key still works.
	p.stop(t)
	sh(readmeBlock(t, "backup"))
	sh(readmeBlock(t, "restore"))
	addr2 := freeAddr(t)
	restored := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": filepath.Join(work, "data-restored"), "GATEHOUSE_ADDR": addr2, "GATEHOUSE_ISSUER": "http://" + addr2})
	c := newCLI(t)
	c.ok("login", "--issuer", restored.base, "--key-file", filepath.Join(work, "data-restored", "bootstrap-admin-key.json"))
	if got := c.ok("orgs", "list"); !strings.Contains(got, `"acme"`) || !strings.Contains(got, `"globex"`) {
		t.Fatalf("after restore: %s", got)
	}
	if got := c.ok("users", "list", "--org", "globex"); !strings.Contains(got, `"alice"`) {
		t.Fatalf("after restore: %s", got)
	}
}
