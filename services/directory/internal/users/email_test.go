package users_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"mime/quotedprintable"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// mailFixture mails through a real outbox into .eml files.
type mailFixture struct {
	*linkFixture
	h      users.Hasher
	sealer mail.Sealer
	m      *users.CodeMail
	dir    string
	outbox *mail.Outbox
}

func newMailFixture(t *testing.T, d db.Dialect) *mailFixture {
	t.Helper()
	f := newLinkFixture(t, d)
	h, err := secrets.NewHasher(bytes.Repeat([]byte{4}, 32))
	if err != nil {
		t.Fatal(err)
	}
	c, err := secrets.NewCipher(bytes.Repeat([]byte{4}, 32), secrets.PurposeMail)
	if err != nil {
		t.Fatal(err)
	}
	sealer := mail.Sealer{Cipher: c}
	dir := t.TempDir()
	f.cmds.Notices = users.MailNotices(sealer, func(context.Context, string) (string, error) { return "Links", nil })
	return &mailFixture{linkFixture: f, h: h, sealer: sealer, dir: dir,
		m: &users.CodeMail{Sealer: sealer, Data: mail.Data{Lang: "en", Org: "Links"}, Issuer: &url.URL{Scheme: "https", Host: "id.example.com"}},
		outbox: &mail.Outbox{DB: f.st, Sender: mail.Dir{Path: dir}, Sealer: sealer, From: "id@example.com", Host: "id.example.com",
			Logger: slog.New(slog.DiscardHandler)}}
}

// delivered sends what is queued and returns the messages written since
// the last call, by recipient.
func (f *mailFixture) delivered(t *testing.T) map[string]string {
	t.Helper()
	if _, err := f.outbox.Deliver(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(f.dir, "*.eml"))
	out := map[string]string{}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		to := regexp.MustCompile(`(?m)^To: <?([^>\r\n]+)>?`).FindSubmatch(b)
		if to == nil {
			t.Fatalf("%s has no To", p)
		}
		// The bodies are quoted-printable: decode them whole (the headers
		// pass unchanged).
		body, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatal(err)
		}
		out[string(to[1])] += string(body)
		os.Remove(p)
	}
	return out
}

var linkCode = regexp.MustCompile(`code=([A-Z2-7]{26})`)

func (f *mailFixture) get(t *testing.T, id string) *users.User {
	t.Helper()
	u, err := f.q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// An address changed without proof is unverified until the code mailed to
// it comes back; the old address hears of the change; a code returned to
// an admin verifies but proves nothing; marks say whose they are.
func TestEmailVerification(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newMailFixture(t, d)
		ctx := context.Background()
		now := time.Now()
		u := f.human(t, "alice")

		resetCode, _, err := f.cmds.RequestPasswordReset(ctx, "admin", u, f.h, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		u = f.get(t, u.ID)
		if _, _, err := f.cmds.ChangeEmail(ctx, "admin", u, "alice.new@example.com", "", f.h, f.m, now); err != nil {
			t.Fatal(err)
		}
		// A reset code that went to the old address dies with it.
		if err := f.q.CheckPasswordCode(ctx, u, f.h, resetCode, now); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("a reset code after the address changed: %v", err)
		}
		u = f.get(t, u.ID)
		if u.Email != "alice.new@example.com" || u.EmailVerified || u.EmailProven || u.EmailDomain != "example.com" {
			t.Fatalf("after the change: %+v", u)
		}
		sent := f.delivered(t)
		if !strings.Contains(sent["alice@example.com"], "alice.new@example.com") {
			t.Fatalf("the old address was not told: %v", sent)
		}
		m := linkCode.FindStringSubmatch(sent["alice.new@example.com"])
		if m == nil || !strings.Contains(sent["alice.new@example.com"], users.PathEmailVerify) {
			t.Fatalf("no verification link to the new address: %v", sent)
		}
		if _, err := f.cmds.VerifyEmail(ctx, u.ID, u, f.h, "WRONG", now); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("a wrong code: %v", err)
		}
		if _, err := f.cmds.VerifyEmail(ctx, u.ID, u, f.h, m[1], now); err != nil {
			t.Fatal(err)
		}
		u = f.get(t, u.ID)
		if !u.EmailVerified || !u.EmailProven {
			t.Fatalf("a mailed code proves the address: %+v", u)
		}
		if _, err := f.cmds.VerifyEmail(ctx, u.ID, u, f.h, m[1], now); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("a used code: %v", err)
		}

		// A returned code: verified on the admin's word only.
		code, _, err := f.cmds.ChangeEmail(ctx, "admin", u, "alice@elsewhere.test", "", f.h, nil, now)
		if err != nil || len(code) < 20 {
			t.Fatalf("returned code %q: %v", code, err)
		}
		u = f.get(t, u.ID)
		if _, err := f.cmds.VerifyEmail(ctx, "admin", u, f.h, code, now); err != nil {
			t.Fatal(err)
		}
		if u = f.get(t, u.ID); !u.EmailVerified || u.EmailProven {
			t.Fatalf("a returned code proves nothing: %+v", u)
		}
		// An IAM owner's mark proves it; marking a proven address again
		// changes nothing.
		if _, _, err := f.cmds.ChangeEmail(ctx, "iam", u, u.Email, users.ProofInstance, f.h, nil, now); err != nil {
			t.Fatal(err)
		}
		if u = f.get(t, u.ID); !u.EmailProven {
			t.Fatalf("an IAM owner's mark: %+v", u)
		}
		if _, _, err := f.cmds.ChangeEmail(ctx, "iam", u, u.Email, users.ProofOrg, f.h, nil, now); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("marking again: %v", err)
		}

		// Another user cannot take the verified address, by mark or code.
		bob := f.human(t, "bob")
		if _, _, err := f.cmds.ChangeEmail(ctx, "admin", bob, u.Email, users.ProofOrg, f.h, nil, now); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("marking another's verified address: %v", err)
		}
		code, _, err = f.cmds.ChangeEmail(ctx, "admin", bob, strings.ToUpper(u.Email), "", f.h, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		bob = f.get(t, bob.ID)
		if _, err := f.cmds.VerifyEmail(ctx, bob.ID, bob, f.h, code, now); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("verifying another's verified address: %v", err)
		}
		if bob = f.get(t, bob.ID); bob.EmailVerified {
			t.Fatal("bob verified alice's address")
		}
		f.delivered(t)
	})
}

// Resends are throttled per user and per address: users sharing an
// address get one message a minute between them.
func TestEmailCodeThrottle(t *testing.T) {
	t.Parallel()
	f := newMailFixture(t, db.SQLite)
	ctx := context.Background()
	now := time.Now()
	a, b := f.human(t, "a"), f.human(t, "b")
	if _, _, err := f.cmds.ResendEmailCode(ctx, "admin", a, f.h, f.m, now); err != nil {
		t.Fatal(err)
	}
	a = f.get(t, a.ID)
	if _, _, err := f.cmds.ResendEmailCode(ctx, "admin", a, f.h, f.m, now); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("again for the user: %v", err)
	}
	if _, _, err := f.cmds.ChangeEmail(ctx, "admin", b, a.Email, "", f.h, f.m, now); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("another user, the same address: %v", err)
	}
	if _, _, err := f.cmds.ResendEmailCode(ctx, "admin", a, f.h, f.m, now.Add(mail.Throttle+time.Second)); err != nil {
		t.Fatalf("after the minute: %v", err)
	}
}

// An invitation sets the first password and proves the address in one
// step; only once; a password change afterwards tells the address.
func TestInvitation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newMailFixture(t, d)
		ctx := context.Background()
		now := time.Now()
		id, _, err := f.cmds.AddHumanMailed(ctx, "admin", f.org, users.HumanAdded{UserName: "ida", FirstName: "I", LastName: "R",
			DisplayName: "I R", Email: "ida@example.com"}, f.h, f.m, now, false)
		if err != nil {
			t.Fatal(err)
		}
		sent := f.delivered(t)
		m := linkCode.FindStringSubmatch(sent["ida@example.com"])
		if m == nil || !strings.Contains(sent["ida@example.com"], users.PathUserInit) {
			t.Fatalf("no invitation: %v", sent)
		}
		u := f.get(t, id)
		if u.State != users.StateInitial {
			t.Fatalf("state %d", u.State)
		}
		hash, err := f.cmds.NewPasswordHash(ctx, u.ID, "Ida-Passw0rd!", f.org.PasswordPolicy)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.Initialize(ctx, u, f.h, "WRONG", hash, now); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("a wrong code: %v", err)
		}
		if _, err := f.cmds.Initialize(ctx, u, f.h, m[1], hash, now); err != nil {
			t.Fatal(err)
		}
		u = f.get(t, id)
		if u.State != users.StateActive || !u.EmailVerified || !u.EmailProven || u.PasswordHash != hash {
			t.Fatalf("after the invitation: %+v", u)
		}
		if _, err := f.cmds.Initialize(ctx, u, f.h, m[1], hash, now); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("the invitation again: %v", err)
		}
		if _, _, err := f.cmds.Invite(ctx, "admin", u, "", f.h, f.m, now); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("inviting an active user: %v", err)
		}
		if sent := f.delivered(t); len(sent) != 0 {
			t.Fatalf("a first password is no change to tell of: %v", sent)
		}
		hash2, _ := f.cmds.NewPasswordHash(ctx, u.ID, "Ida-Passw0rd-2!", f.org.PasswordPolicy)
		if _, err := f.cmds.SetPassword(ctx, u.ID, u, hash2, false, false); err != nil {
			t.Fatal(err)
		}
		if sent := f.delivered(t); !strings.Contains(sent["ida@example.com"], "password") {
			t.Fatalf("the password change was not told: %v", sent)
		}
		evs, err := f.es.Events(ctx, eventstore.Filter{AggregateID: u.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if strings.Contains(string(ev.Payload), m[1]) {
				t.Fatalf("event %s holds the code", ev.Type)
			}
		}
	})
}
