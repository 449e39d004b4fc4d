package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// TestCLIBrowserLogin: gatehouse login --no-browser prints the sign-in URL
// (code + PKCE, the native app gatehouse-cli, a loopback redirect on a
// port of its choosing); headless Chromium signs the admin in there
// (e2e/browser/cli-login.test.mjs); the CLI gets its tokens, refreshes
// them, manages, and logout revokes them.
func TestCLIBrowserLogin(t *testing.T) {
	root := requireBrowser(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	const password = "Admin-Passw0rd-for-cli"
	startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer, "GATEHOUSE_ADMIN_PASSWORD": password,
	})
	c := newCLI(t)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	login := exec.CommandContext(ctx, c.bin, "login", "--issuer", issuer, "--no-browser", "--name", "human", "--timeout", "80s")
	login.Env = []string{"HOME=" + c.home, "XDG_CONFIG_HOME=" + filepath.Join(c.home, "config"), "PATH=" + os.Getenv("PATH")}
	stderr, err := login.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	var loginURL string
	var printed strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		printed.WriteString(line + "\n")
		if u := strings.TrimSpace(line); strings.HasPrefix(u, issuer+"/oauth/v2/authorize?") {
			loginURL = u
			break
		}
	}
	if loginURL == "" {
		_ = login.Wait()
		t.Fatalf("gatehouse login printed no sign-in URL:\n%s", printed.String())
	}
	rest := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		rest <- b.String()
	}()

	artifacts := filepath.Join(root, "test-artifacts", "cli-browser")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	node := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "--test-timeout=60000", filepath.Join("e2e", "browser", "cli-login.test.mjs"))
	node.Dir = root
	node.Cancel = func() error { return node.Process.Signal(syscall.SIGTERM) }
	node.WaitDelay = 10 * time.Second
	node.Env = append(os.Environ(),
		"GATEHOUSE_CLI_LOGIN_URL="+loginURL, "GATEHOUSE_CLI_LOGIN_NAME=admin", "GATEHOUSE_CLI_PASSWORD="+password,
		"GATEHOUSE_CLI_ARTIFACTS="+artifacts, "GATEHOUSE_BROWSER_CHROMIUM="+chromiumPath)
	out, err := node.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("node did not finish in time:\n%s", out)
	}
	if err != nil {
		t.Fatalf("browser half failed (%v):\n%s", err, out)
	}
	if err := login.Wait(); err != nil {
		t.Fatalf("gatehouse login: %v\n%s%s", err, printed.String(), <-rest)
	}
	if msg := <-rest; !strings.Contains(msg, `context "human" is now current`) {
		t.Fatalf("gatehouse login said:\n%s", msg)
	}

	who := c.json("whoami")
	if who["kind"] != "browser" || who["orgName"] != "Gatehouse" || !strings.Contains(str(who["name"]), "admin") {
		t.Fatalf("whoami after the browser login: %v", who)
	}
	// An admin of every organization through the admin client.
	c.ok("orgs", "create", "made-by-a-person")

	// The refresh token works: make the stored access token stale.
	var f struct {
		Current  string                    `json:"current"`
		Contexts map[string]map[string]any `json:"contexts"`
	}
	raw, _ := os.ReadFile(c.configPath())
	if err := json.Unmarshal(raw, &f); err != nil || str(f.Contexts["human"]["refreshToken"]) == "" {
		t.Fatalf("contexts file: %v %s", err, raw)
	}
	old := str(f.Contexts["human"]["accessToken"])
	f.Contexts["human"]["expiry"] = time.Now().Add(-time.Hour).Format(time.RFC3339)
	raw, _ = json.Marshal(f)
	if err := os.WriteFile(c.configPath(), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := strings.TrimSpace(c.ok("token"))
	if fresh == "" || fresh == old {
		t.Fatal("gatehouse token did not refresh a stale access token")
	}

	// logout revokes the refresh token and the access token.
	c.ok("logout")
	if status, _ := restJSON(t, "GET", issuer+"/oidc/v1/userinfo", fresh, nil); status != 401 {
		t.Fatalf("the access token after logout: %d; want 401", status)
	}
	c.fail([]string{"error:", "run gatehouse login"}, "whoami")
}
