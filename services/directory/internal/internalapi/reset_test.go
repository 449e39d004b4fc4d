package internalapi_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// waitForMail returns the .eml files in dir once there are n.
func waitForMail(t *testing.T, dir string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
		if len(files) >= n {
			return files
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mail files in %s after 10 s; want %d", len(files), dir, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mailText is an .eml file's plain-text part, decoded.
func mailText(t *testing.T, file string) (*mail.Message, string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	r := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if err != nil {
			t.Fatalf("no text/plain part in %s: %v", file, err)
		}
		if strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") {
			var body io.Reader = p
			if p.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
				body = quotedprintable.NewReader(p)
			}
			b, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			return m, string(b)
		}
	}
}

var resetLinkRE = regexp.MustCompile(`https?://\S+/ui/login/password/new\?\S+`)

// "Forgot password?" end to end inside the directory: the request
// answers alike for a known and an unknown name, the known user gets a
// mail (an .eml file in the embedded mode) in her language with a link
// whose code sets a new password once, under the policy; logs never
// show the code.
func TestPasswordReset(t *testing.T) {
	t.Parallel()
	e := mgmttest.Start(t, db.SQLite)
	logs := &testutil.SyncBuffer{}
	e.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.Restart()
	ctx := context.Background()
	c := e.Internal(mgmttest.InternalToken)
	if r := e.REST("POST", "/management/v1/policies/login", e.AdminToken, "", map[string]any{
		"allowUsernamePassword": true, "allowRegister": true}); r.Status != 200 {
		t.Fatalf("AddCustomLoginPolicy: %d %s", r.Status, r.Body)
	}
	u := register(t, c, e.OrgID, "grace", "grace@example.com")

	for _, name := range []string{"grace", "nobody"} {
		if _, err := c.RequestPasswordReset(ctx, &directoryv1.RequestPasswordResetRequest{OrgId: e.OrgID, LoginName: name, Language: "en"}); err != nil {
			t.Fatalf("RequestPasswordReset(%s): %v", name, err)
		}
	}
	if _, err := c.RequestPasswordReset(ctx, &directoryv1.RequestPasswordResetRequest{OrgId: "no-such-org", LoginName: "grace"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("an unknown organization: %v", err)
	}
	// The registration's verification code, then the reset link.
	files := waitForMail(t, filepath.Join(e.DataDir(), "mail"), 2)
	var msg *mail.Message
	var text string
	for _, f := range files {
		if msg, text = mailText(t, f); resetLinkRE.MatchString(text) {
			break
		}
	}
	if got := msg.Header.Get("To"); got != "<grace@example.com>" {
		t.Fatalf("To %q", got)
	}
	if subj, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); subj != "Passwort zurücksetzen" {
		t.Fatalf("subject %q; want German (the user's preferred language)", subj)
	}
	link := resetLinkRE.FindString(text)
	if link == "" {
		t.Fatalf("no reset link in:\n%s", text)
	}
	lu, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	code, userID := lu.Query().Get("code"), lu.Query().Get("userID")
	if userID != u.GetId() || len(code) < 20 {
		t.Fatalf("link %s; want grace's id and a long code", link)
	}

	if _, err := c.CheckPasswordResetCode(ctx, &directoryv1.CheckPasswordResetCodeRequest{UserId: userID, Code: "WRONG"}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a wrong code: %v", err)
	}
	if res, err := c.CheckPasswordResetCode(ctx, &directoryv1.CheckPasswordResetCodeRequest{UserId: userID, Code: code}); err != nil || res.GetUser().GetId() != userID {
		t.Fatalf("the link's code: %v", err)
	}
	// Under the password policy; a refusal keeps the code.
	if _, err := c.ResetPassword(ctx, &directoryv1.ResetPasswordRequest{UserId: userID, Code: code, Password: "short"}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a weak password: %v", err)
	}
	const newPW = "N3w-Corr3ct-Horse"
	if _, err := c.ResetPassword(ctx, &directoryv1.ResetPasswordRequest{UserId: userID, Code: code, Password: newPW}); err != nil {
		t.Fatalf("ResetPassword: %v", err)
	}
	if _, err := c.ResetPassword(ctx, &directoryv1.ResetPasswordRequest{UserId: userID, Code: code, Password: "An0ther-Corr3ct"}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("the code used twice: %v", err)
	}
	if _, err := verify(c, e.OrgID, "grace", newPW, "192.0.2.1"); err != nil {
		t.Fatalf("sign-in with the new password: %v", err)
	}
	if _, err := verify(c, e.OrgID, "grace", pw, "192.0.2.1"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("sign-in with the old password: %v", err)
	}
	// Access is cut as by an admin's reset.
	var cut int
	if err := e.DB.Get(ctx, &cut, `SELECT COUNT(*) FROM users WHERE id = ? AND sessions_not_before IS NOT NULL`, userID); err != nil || cut != 1 {
		t.Fatalf("sessions_not_before after the reset: %d, %v", cut, err)
	}
	if strings.Contains(logs.String(), code) {
		t.Fatal("the logs show the reset code")
	}
	if !strings.Contains(logs.String(), `"msg":"mail: sent"`) {
		t.Fatalf("no delivery logged:\n%s", logs.String())
	}
}

// Separate services without a relay send nothing, and say why.
func TestPasswordResetWithoutRelay(t *testing.T) {
	t.Parallel()
	e := mgmttest.StartEnv(t, db.Postgres, map[string]string{"GATEHOUSE_SMTP_HOST": "", "GATEHOUSE_SMTP_PORT": "",
		"GATEHOUSE_SMTP_TLS": "", "GATEHOUSE_SMTP_FROM": ""})
	c := e.Internal(mgmttest.InternalToken)
	_, err := c.RequestPasswordReset(context.Background(), &directoryv1.RequestPasswordResetRequest{OrgId: e.OrgID, LoginName: "x"})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "GATEHOUSE_SMTP_HOST") {
		t.Fatalf("without a relay: %v; want FailedPrecondition naming GATEHOUSE_SMTP_HOST", err)
	}
}
