package e2e

import (
	"database/sql"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

var resetLinkRE = regexp.MustCompile(`https?://\S+/ui/login/password/new\?\S+`)

// requestReset asks for name's reset link as a browser does: the first
// login page's "Forgot password?", then the login name.
func requestReset(t *testing.T, e *afEnv, c *http.Client, name, state string) afPage {
	t.Helper()
	p := afGet(t, c, e.authURL(state, "n-"+state))
	link := html.UnescapeString(regexpFind(t, p.body, `href="(/ui/login/password/reset\?authRequestID=[^"]+)"`))
	rp := afGet(t, c, e.base+link)
	if rp.status != http.StatusOK || !strings.Contains(rp.body, "Reset your password") {
		t.Fatalf("the reset page: %d:\n%s", rp.status, rp.body)
	}
	return afSubmit(t, c, e.base, rp, url.Values{"loginName": {name}})
}

// "Forgot password?" over real SMTP: the same answer for a known and an
// unknown name, the mail's link sets a new password once, the old one
// stops working, and the new one signs in.
func TestPasswordResetByMail(t *testing.T) {
	mp := startMailpit(t)
	e := afStartEnv(t, mp.env())
	e.user("rita", afPassword, false)

	known := requestReset(t, e, browser(t, e.base), "rita", "r1")
	unknown := requestReset(t, e, browser(t, e.base), "nobody", "r2")
	for _, p := range []afPage{known, unknown} {
		if p.status != http.StatusOK || !strings.Contains(p.body, "If the login name belongs to an account") {
			t.Fatalf("the answer: %d:\n%s", p.status, p.body)
		}
	}
	msgs := mp.waitFor("rita@example.com", 1)
	if msgs[0].Subject != "Reset your password" || !strings.HasSuffix(msgs[0].MessageID, "@127.0.0.1") {
		t.Fatalf("message %+v", msgs[0])
	}
	link := resetLinkRE.FindString(mp.text(msgs[0].ID))
	if link == "" || !strings.HasPrefix(link, e.base+"/ui/login/password/new?") {
		t.Fatalf("no link under the issuer in:\n%s", mp.text(msgs[0].ID))
	}

	b := browser(t, e.base)
	np := afGet(t, b, link)
	if np.status != http.StatusOK || !strings.Contains(np.body, "Choose a new password") {
		t.Fatalf("the link's page: %d:\n%s", np.status, np.body)
	}
	if r := afSubmit(t, b, e.base, np, url.Values{"newPassword": {"short"}, "confirmPassword": {"short"}}); r.status != http.StatusBadRequest {
		t.Fatalf("a password against the policy: %d", r.status)
	}
	const newPW = "Rita-N3w-Passw0rd!"
	done := afSubmit(t, b, e.base, np, url.Values{"newPassword": {newPW}, "confirmPassword": {newPW}})
	if done.status != http.StatusOK || !strings.Contains(done.body, "Your password was changed") {
		t.Fatalf("after the new password: %d:\n%s", done.status, done.body)
	}
	if again := afGet(t, browser(t, e.base), link); again.status != http.StatusBadRequest || !strings.Contains(again.body, "not valid") {
		t.Fatalf("the link a second time: %d:\n%s", again.status, again.body)
	}
	e.signIn(browser(t, e.base), "rita", newPW, "r3")
	ob := browser(t, e.base)
	if p := e.password(ob, afGet(t, ob, e.authURL("r4", "n-r4")), "rita", afPassword); p.status != http.StatusUnauthorized {
		t.Fatalf("the old password: %d; want 401", p.status)
	}
	if n := len(mp.messages("nobody@example.com")); n != 0 {
		t.Fatalf("%d messages for an unknown name", n)
	}
}

// outboxState reads a user's messages' states from the directory's
// database.
func outboxState(t *testing.T, dataDir, kind string) (states []string, attempts int) {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "directory.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rows, err := d.Query(`SELECT state, attempts FROM mail_outbox WHERE kind = ? ORDER BY created_at`, kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var a int
		if err := rows.Scan(&s, &a); err != nil {
			t.Fatal(err)
		}
		states, attempts = append(states, s), attempts+a
	}
	return states, attempts
}

// waitOutbox waits until ok holds of the outbox's password reset rows.
func waitOutbox(t *testing.T, dataDir string, what string, ok func(states []string, attempts int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, a := outboxState(t, dataDir, "password_reset")
		if ok(s, a) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox %v (%d attempts) after 30 s; want %s", s, a, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With SMTP down the reset still answers; the mail goes once SMTP is
// back, once. Queued mail survives a restart of the process and is then
// delivered once.
func TestMailSurvivesOutageAndRestart(t *testing.T) {
	mp := startMailpit(t)
	dir, addr := t.TempDir(), freeAddr(t)
	env := mp.env()
	for k, v := range map[string]string{"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": "http://" + addr,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e"} {
		env[k] = v
	}
	p := startProc(t, config.RoleEdge, env)
	e := afSetup(t, p.base, dir)
	e.user("sam", afPassword, false)
	e.user("tom", afPassword, false)

	mp.stop()
	if r := requestReset(t, e, browser(t, e.base), "sam", "s1"); r.status != http.StatusOK {
		t.Fatalf("reset with SMTP down: %d", r.status)
	}
	waitOutbox(t, dir, "a failed try", func(s []string, a int) bool { return len(s) == 1 && s[0] == "pending" && a >= 1 })
	mp.start()
	mp.waitFor("sam@example.com", 1)
	waitOutbox(t, dir, "sent", func(s []string, _ int) bool { return len(s) == 1 && s[0] == "sent" })
	if n := len(mp.messages("sam@example.com")); n != 1 {
		t.Fatalf("%d messages to sam; want 1", n)
	}

	mp.stop()
	if r := requestReset(t, e, browser(t, e.base), "tom", "t1"); r.status != http.StatusOK {
		t.Fatalf("reset with SMTP down: %d", r.status)
	}
	waitOutbox(t, dir, "tom's mail queued and tried", func(s []string, a int) bool { return len(s) == 2 && s[1] == "pending" })
	p.stop(t)
	mp.start()
	startProc(t, config.RoleEdge, env)
	mp.waitFor("tom@example.com", 1)
	waitOutbox(t, dir, "both sent", func(s []string, _ int) bool { return len(s) == 2 && s[0] == "sent" && s[1] == "sent" })
	if n := len(mp.messages("tom@example.com")); n != 1 {
		t.Fatalf("%d messages to tom; want 1", n)
	}
}

// TestReadmeMail runs the README's mailpit example: mailpit with its
// flags, Gatehouse with its variables (in-process instead of make run),
// and a reset whose mail appears in mailpit's API at the README's port.
func TestReadmeMail(t *testing.T) {
	block := readmeBlock(t, "mail")
	args := regexp.MustCompile(`bin/mailpit ([^&\n]+)&`).FindStringSubmatch(block)
	if args == nil {
		t.Fatalf("no mailpit command in:\n%s", block)
	}
	fields := strings.Fields(args[1])
	mp := startMailpit(t) // builds the binary and proves it runs; now the README's instance
	mp.stop()
	readme := &mailpit{t: t, dir: t.TempDir()}
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "--smtp":
			readme.smtpAddr = fields[i+1]
		case "--listen":
			readme.api = "http://" + fields[i+1]
		}
	}
	if readme.smtpAddr == "" || readme.api == "" {
		t.Fatalf("the README's mailpit lacks --smtp or --listen: %q", args[1])
	}
	readme.start()
	t.Cleanup(readme.stop)
	dir, addr := t.TempDir(), freeAddr(t)
	env := map[string]string{"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": "http://" + addr,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e"}
	for _, m := range regexp.MustCompile(`(GATEHOUSE_\w+)=('[^']*'|\S+)`).FindAllStringSubmatch(block, -1) {
		env[m[1]] = strings.Trim(m[2], "'")
	}
	if env["GATEHOUSE_SMTP_HOST"] == "" {
		t.Fatalf("no GATEHOUSE_SMTP_HOST in:\n%s", block)
	}
	p := startProc(t, config.RoleEdge, env)
	e := afSetup(t, p.base, dir)
	e.user("una", afPassword, false)
	requestReset(t, e, browser(t, e.base), "una", "u1")
	if got := readme.waitFor("una@example.com", 1); got[0].Subject != "Reset your password" {
		t.Fatalf("message %+v", got[0])
	}
}
