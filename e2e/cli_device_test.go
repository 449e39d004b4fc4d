package e2e

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var reDeviceComplete = regexp.MustCompile(`\(or open (\S+/device\?user_code=\S+)\)`)

// TestCLIDeviceLogin: gatehouse login --device signs a person in with the
// device flow against the server itself. The gatehouse-cli app refuses it
// until an admin adds the grant (off by default: a device code someone
// else started is a lure for an admin's session), and the CLI says how;
// then the CLI shows a URL and a code, a browser approves, and the CLI's
// context holds a management session.
func TestCLIDeviceLogin(t *testing.T) {
	t.Parallel()
	edge, issuer, _, admin := deviceApp(t)
	c := newCLI(t)
	c.fail([]string{"unauthorized_client", "OIDC_GRANT_TYPE_DEVICE_CODE", "gatehouse apps update-oidc"},
		"login", "--issuer", issuer, "--device")

	// The admin allows the device flow for the CLI's app.
	_, list := restJSON(t, "POST", edge.base+"/management/v1/projects/_search", admin, map[string]any{
		"queries": []any{map[string]any{"nameQuery": map[string]any{"name": "Gatehouse"}}}})
	projectID := list["result"].([]any)[0].(map[string]any)["id"].(string)
	_, apps := restJSON(t, "POST", edge.base+"/management/v1/projects/"+projectID+"/apps/_search", admin, map[string]any{})
	app := apps["result"].([]any)[0].(map[string]any)
	cfg := app["oidcConfig"].(map[string]any)
	update := map[string]any{}
	for _, k := range []string{"redirectUris", "responseTypes", "appType", "authMethodType", "accessTokenType"} {
		update[k] = cfg[k]
	}
	update["grantTypes"] = append(cfg["grantTypes"].([]any), "OIDC_GRANT_TYPE_DEVICE_CODE")
	if status, res := restJSON(t, "PUT", edge.base+"/management/v1/projects/"+projectID+"/apps/"+app["id"].(string)+"/oidc_config",
		admin, update); status != 200 {
		t.Fatalf("UpdateOIDCAppConfig: %d %v", status, res)
	}

	// The tokens service learns of the change through the directory's
	// change feed, within about a second.
	for deadline := time.Now().Add(15 * time.Second); ; {
		st, _ := postForm(t, edge.base+"/oauth/v2/device_authorization", url.Values{"client_id": {"gatehouse-cli"}})
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the device grant is still refused: %d", st)
		}
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	login := exec.CommandContext(ctx, c.bin, "login", "--issuer", issuer, "--device", "--name", "tv", "--timeout", "80s")
	login.Env = []string{"HOME=" + c.home, "XDG_CONFIG_HOME=" + filepath.Join(c.home, "config"), "PATH=" + os.Getenv("PATH")}
	stderr, err := login.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	var complete string
	var printed strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if m := reDeviceComplete.FindStringSubmatch(sc.Text()); m != nil {
			complete = m[1]
			break
		}
	}
	if complete == "" || !strings.Contains(printed.String(), issuer+"/device\n") {
		_ = login.Wait()
		t.Fatalf("gatehouse login --device printed no code:\n%s", printed.String())
	}
	go func() { // the rest of the output, so the CLI never blocks on it
		for sc.Scan() {
		}
	}()
	u, _ := url.Parse(complete)
	if !strings.Contains(printed.String(), "enter the code  "+u.Query().Get("user_code")) {
		t.Fatalf("the code is not shown:\n%s", printed.String())
	}

	b := browser(t, issuer)
	res := enterUserCode(t, b, edge.base, complete, "")
	page := body(t, res)
	res = submit(t, b, edge.base, page, url.Values{"loginName": {"admin"}})
	page = body(t, res)
	res = submit(t, b, edge.base, page, url.Values{"password": {"Admin-Passw0rd-for-e2e"}})
	page = body(t, res)
	if !strings.Contains(page, "gatehouse-cli") {
		t.Fatalf("consent page:\n%s", page)
	}
	res = submit(t, b, edge.base, page, url.Values{"decision": {"accept"}})
	if page = body(t, res); !strings.Contains(page, "Your device is signed in") {
		t.Fatalf("after approval: %d\n%s", res.StatusCode, page)
	}
	if err := login.Wait(); err != nil {
		t.Fatalf("gatehouse login --device: %v", err)
	}
	who := c.json("whoami")
	if who["kind"] != "browser" || who["orgName"] != "Gatehouse" || !strings.Contains(str(who["name"]), "admin") {
		t.Fatalf("whoami after the device login: %v", who)
	}
	c.ok("orgs", "list")
}
