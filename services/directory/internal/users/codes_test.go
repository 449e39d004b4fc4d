package users_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Password reset codes: a returned code works until it expires; a mailed
// one is queued (sealed) in the event's transaction, at most one per
// minute; a password change voids the code; the event holds no code.
func TestPasswordResetCodes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newLinkFixture(t, d)
		ctx := context.Background()
		h, err := secrets.NewHasher(bytes.Repeat([]byte{3}, 32))
		if err != nil {
			t.Fatal(err)
		}
		c, err := secrets.NewCipher(bytes.Repeat([]byte{3}, 32), secrets.PurposeMail)
		if err != nil {
			t.Fatal(err)
		}
		// The event store stamps the outbox with the real clock.
		now := time.Now().UTC()
		u := f.human(t, "alice")

		code, evs, err := f.cmds.RequestPasswordReset(ctx, "admin", u, h, nil, now)
		if err != nil || len(code) < 20 || len(evs) != 1 || evs[0].Type != users.EventPasswordCodeAdded {
			t.Fatalf("returned code: %q, %v, %v", code, evs, err)
		}
		if strings.Contains(string(evs[0].Payload), code) {
			t.Fatal("the event holds the code")
		}
		u, _ = f.q.Get(ctx, u.ID)
		for _, c := range []struct {
			code string
			at   time.Time
			ok   bool
		}{{code, now, true}, {code, now.Add(users.PasswordCodeLifetime - time.Second), true}, {code, now.Add(users.PasswordCodeLifetime), false},
			{"wrong", now, false}, {"", now, false}} {
			err := f.q.CheckPasswordCode(ctx, u, h, c.code, c.at)
			if (err == nil) != c.ok || (err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument) {
				t.Errorf("CheckPasswordCode(%q at +%v) = %v; want ok %v", c.code, c.at.Sub(now), err, c.ok)
			}
		}

		// Mailed: no code returned, one message queued, a second refused
		// within the minute, a new one after it.
		m := &users.CodeMail{Sealer: mail.Sealer{Cipher: c}, Data: mail.Data{Lang: "en", Org: "Links", Name: "F L"},
			Issuer: &url.URL{Scheme: "https", Host: "id.example.com"}}
		if code, _, err := f.cmds.RequestPasswordReset(ctx, "admin", u, h, m, now); err != nil || code != "" {
			t.Fatalf("mailed: %q, %v", code, err)
		}
		u, _ = f.q.Get(ctx, u.ID)
		if _, _, err := f.cmds.RequestPasswordReset(ctx, "admin", u, h, m, now.Add(30*time.Second)); !errors.Is(err, users.ErrThrottled) {
			t.Fatalf("a second mail within the minute: %v; want ErrThrottled", err)
		}
		if _, _, err := f.cmds.RequestPasswordReset(ctx, "admin", u, h, m, now.Add(mail.Throttle+time.Second)); err != nil {
			t.Fatalf("after the minute: %v", err)
		}
		var queued int
		if err := f.st.Get(ctx, &queued, `SELECT COUNT(*) FROM mail_outbox WHERE user_id = ? AND kind = ? AND state = ? AND data IS NOT NULL`,
			u.ID, mail.KindPasswordReset, mail.StatePending); err != nil || queued != 2 {
			t.Fatalf("queued mails: %d, %v; want 2", queued, err)
		}
		// The earlier code died with its replacement; a password change
		// voids the new one.
		if err := f.q.CheckPasswordCode(ctx, u, h, code, now); err == nil {
			t.Fatal("a replaced code still works")
		}
		u, _ = f.q.Get(ctx, u.ID)
		code, _, err = f.cmds.RequestPasswordReset(ctx, "admin", u, h, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		u, _ = f.q.Get(ctx, u.ID)
		hash, err := f.cmds.NewPasswordHash(ctx, u.ID, "N3w-Passw0rd!", f.org.PasswordPolicy)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.cmds.SetPassword(ctx, "admin", u, hash, false, true); err != nil {
			t.Fatal(err)
		}
		if err := f.q.CheckPasswordCode(ctx, u, h, code, now); err == nil {
			t.Fatal("the code works after a password change")
		}

		// No address: nothing to mail to.
		u2 := f.human(t, "bob")
		if _, err := f.st.Exec(ctx, `UPDATE users SET email = '' WHERE id = ?`, u2.ID); err != nil {
			t.Fatal(err)
		}
		u2, _ = f.q.Get(ctx, u2.ID)
		if _, _, err := f.cmds.RequestPasswordReset(ctx, "admin", u2, h, m, now); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("no address: %v", err)
		}
	})
}
