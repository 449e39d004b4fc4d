package users_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
	"github.com/gatehouse-id/gatehouse/services/directory/migrations"
)

type linkFixture struct {
	st      *db.DB
	es      *eventstore.Store
	cmds    *users.Commands
	q       *users.Queries
	org     *orgs.Org
	idpID   string
	idpCmds *idps.Commands
}

// ext is the identity subject at the fixture's IdP as it is configured.
func (f *linkFixture) ext(subject string) users.External {
	return users.External{IdPID: f.idpID, Issuer: "https://idp.example.com", ClientID: "c", Subject: subject}
}

func newLinkFixture(t *testing.T, d db.Dialect) *linkFixture {
	t.Helper()
	ctx := context.Background()
	st := storetest.Open(t, d)
	es := eventstore.New(st, nil)
	projections.RegisterAll(es)
	orgID, _, err := (&orgs.Commands{ES: es, IssuerHost: "example.com"}).AddOrg(ctx, "test", "Links", nil)
	if err != nil {
		t.Fatal(err)
	}
	org, err := (&orgs.Queries{DB: st}).Get(ctx, orgID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := secrets.NewCipher(bytes.Repeat([]byte{7}, 32), secrets.PurposeIdPSecrets)
	if err != nil {
		t.Fatal(err)
	}
	idpCmds := &idps.Commands{ES: es, Cipher: c}
	idpID, _, err := idpCmds.AddOIDC(ctx, "test", orgID, idps.NewOIDC{
		Name: "IdP", ClientSecret: "s", Config: idps.Config{ClientID: "c", Issuer: "https://idp.example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	q := &users.Queries{DB: st}
	return &linkFixture{st: st, es: es, cmds: &users.Commands{ES: es, Q: q}, q: q, org: org, idpID: idpID, idpCmds: idpCmds}
}

func (f *linkFixture) human(t *testing.T, name string) *users.User {
	t.Helper()
	ctx := context.Background()
	id, _, err := f.cmds.AddHuman(ctx, "test", f.org, users.HumanAdded{UserName: name, FirstName: "F", LastName: "L", DisplayName: "F L", Email: name + "@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := f.q.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Concurrent links of one external identity to different users: exactly
// one wins, the others are AlreadyExists (the projection's primary key
// decides when the checks before the push all passed).
func TestConcurrentLinksOfOneIdentity(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newLinkFixture(t, d)
		const n = 16
		us := make([]*users.User, n)
		for i := range us {
			us[i] = f.human(t, fmt.Sprintf("u%d", i))
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = f.cmds.AddLink(ctx, "test", us[i], f.ext("same-subject"))
			})
		}
		wg.Wait()
		won := ""
		for i, err := range errs {
			switch {
			case err == nil:
				if won != "" {
					t.Fatalf("two links of one identity: %s and %s", won, us[i].ID)
				}
				won = us[i].ID
			case connect.CodeOf(err) != connect.CodeAlreadyExists:
				t.Errorf("concurrent link: %v; want success or AlreadyExists", err)
			}
		}
		l, err := f.q.Link(ctx, f.idpID, "same-subject")
		if err != nil || l.UserID != won {
			t.Fatalf("stored link %v, %v; want the winner %q", l, err, won)
		}
		var count int
		if err := f.st.Get(ctx, &count, `SELECT COUNT(*) FROM user_links`); err != nil || count != 1 {
			t.Fatalf("%d links stored (%v); want 1", count, err)
		}
	})
}

// An externally registered user is active without a password, its link is
// part of the same push, and a refused registration leaves nothing behind.
func TestAddExternalHuman(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newLinkFixture(t, d)
		x := f.ext("sub-1")
		id, evs, err := f.cmds.AddExternalHuman(ctx, "test", f.org, users.HumanAdded{
			UserName: "ext", FirstName: "E", LastName: "X", DisplayName: "E X", Email: "ext@example.com",
			PasswordHash: "ignored: external users have no password",
		}, x)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Type != users.EventHumanAdded || evs[1].Type != users.EventIdPLinkAdded ||
			evs[0].Version != 1 || evs[1].Version != 2 || !evs[0].CreatedAt.Equal(evs[1].CreatedAt) {
			t.Fatalf("events %+v; want human added and link added in one push", evs)
		}
		u, err := f.q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.State != users.StateActive || u.PasswordHash != "" || u.PasswordChanged != nil || u.Version != 2 ||
			u.Sequence != evs[1].Sequence || !u.CreationDate.Equal(evs[0].CreatedAt) {
			t.Fatalf("user %+v; want active, no password, version 2 at the link's sequence", u)
		}
		if l, err := f.q.Link(ctx, f.idpID, "sub-1"); err != nil || l.UserID != id || l.OrgID != f.org.ID || l.Sequence != evs[1].Sequence {
			t.Fatalf("link %+v, %v", l, err)
		}

		// A human added without a password and not external waits for one.
		if initial := f.human(t, "plain"); initial.State != users.StateInitial {
			t.Fatalf("state of a user without password %d; want initial", initial.State)
		}

		var before int
		_ = f.st.Get(ctx, &before, `SELECT COUNT(*) FROM events`)
		// The identity is linked already.
		_, _, err = f.cmds.AddExternalHuman(ctx, "test", f.org, users.HumanAdded{UserName: "other", FirstName: "O", LastName: "O", Email: "o@example.com"}, x)
		if connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("second registration of one identity: %v; want AlreadyExists", err)
		}
		// The user name is taken: the link is not stored either.
		_, _, err = f.cmds.AddExternalHuman(ctx, "test", f.org, users.HumanAdded{UserName: "ext", FirstName: "O", LastName: "O", Email: "o@example.com"},
			f.ext("sub-2"))
		if connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("taken user name: %v; want AlreadyExists", err)
		}
		if _, err := f.q.Link(ctx, f.idpID, "sub-2"); err == nil {
			t.Fatal("a refused registration stored its link")
		}
		var after int
		_ = f.st.Get(ctx, &after, `SELECT COUNT(*) FROM events`)
		if after != before {
			t.Fatalf("refused registrations added %d events", after-before)
		}
	})
}

// A link is a credential of its user, tied to the provider as it was when
// linked: a new issuer or client id drops every link (whoever can repoint
// the provider must not sign in as its users), other changes keep them,
// and a provider changed back does not bring them back.
func TestLinksFollowTheProvider(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newLinkFixture(t, d)
		idp := func() *idps.IDP {
			p, err := (&idps.Queries{DB: f.st}).Get(ctx, f.org.ID, f.idpID)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		u := f.human(t, "ada")
		if _, err := f.cmds.AddLink(ctx, "test", u, f.ext("sub-ada")); err != nil {
			t.Fatal(err)
		}
		update := func(cfg idps.Config, secret string) []eventstore.Event {
			t.Helper()
			evs, err := f.idpCmds.UpdateOIDCConfig(ctx, "test", idp(), cfg, secret)
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}
		same := idps.Config{ClientID: "c", Issuer: "https://idp.example.com", Scopes: idps.StringList{"email"}}
		if evs := update(same, ""); bytes.Contains(evs[0].Payload, []byte("linksDropped")) {
			t.Errorf("a change of scopes records dropped links: %s", evs[0].Payload)
		}
		if l, err := f.q.Link(ctx, f.idpID, "sub-ada"); err != nil || l.UserID != u.ID {
			t.Fatalf("after a change of scopes: %+v, %v; want the link kept", l, err)
		}
		for _, cfg := range []idps.Config{
			{ClientID: "c", Issuer: "https://evil.example.com"},
			{ClientID: "other-client", Issuer: "https://idp.example.com"},
		} {
			if _, err := f.cmds.AddLink(ctx, "test", f.reload(t, u), f.ext("sub-ada")); err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatal(err)
			}
			restore := idp().Config
			evs := update(cfg, "new-secret")
			if !bytes.Contains(evs[0].Payload, []byte(`"linksDropped":true`)) {
				t.Errorf("repointing to %+v: payload %s; want linksDropped recorded", cfg, evs[0].Payload)
			}
			if l, err := f.q.Link(ctx, f.idpID, "sub-ada"); err == nil {
				t.Fatalf("repointed to %+v: link %+v survives", cfg, l)
			}
			var rows int
			_ = f.st.Get(ctx, &rows, `SELECT COUNT(*) FROM user_links WHERE idp_id = ?`, f.idpID)
			if rows != 0 {
				t.Fatalf("repointed to %+v: %d link rows; want none", cfg, rows)
			}
			update(restore, "s")
			if _, err := f.q.Link(ctx, f.idpID, "sub-ada"); err == nil {
				t.Fatalf("changed back from %+v: the link is back", cfg)
			}
		}
	})
}

func (f *linkFixture) reload(t *testing.T, u *users.User) *users.User {
	t.Helper()
	u, err := f.q.Get(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// An admin's password reset and a deactivation remove the links that the
// user's password proved (whoever knew it may have made them), each as an
// event of the audit log; the link a user was registered with stays.
func TestResetAndDeactivationRemovePasswordLinks(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newLinkFixture(t, d)
		for _, tc := range []struct {
			name string
			cut  func(u *users.User) ([]eventstore.Event, error)
		}{
			{users.LinkRemovedByReset, func(u *users.User) ([]eventstore.Event, error) {
				return f.cmds.SetPassword(ctx, "admin", u, "$argon2id$x", true, true)
			}},
			{users.LinkRemovedByDeactivation, func(u *users.User) ([]eventstore.Event, error) {
				return f.cmds.Deactivate(ctx, "admin", u)
			}},
		} {
			id, _, err := f.cmds.AddHuman(ctx, "test", f.org, users.HumanAdded{UserName: "victim-" + tc.name, FirstName: "V", LastName: "V",
				Email: "victim-" + tc.name + "@example.com", PasswordHash: "$argon2id$old"})
			if err != nil {
				t.Fatal(err)
			}
			u := f.reload(t, &users.User{ID: id})
			if _, err := f.cmds.AddLink(ctx, "test", u, f.ext("attacker-"+tc.name)); err != nil {
				t.Fatal(err)
			}
			regID, _, err := f.cmds.AddExternalHuman(ctx, "test", f.org, users.HumanAdded{UserName: "reg-" + tc.name, FirstName: "R", LastName: "R",
				Email: "reg-" + tc.name + "@example.com"}, f.ext("own-"+tc.name))
			if err != nil {
				t.Fatal(err)
			}
			evs, err := tc.cut(f.reload(t, u))
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Type != users.EventIdPLinkRemoved || !bytes.Contains(evs[0].Payload, []byte(`"reason":"`+tc.name+`"`)) {
				t.Fatalf("%s: events %+v; want the link's removal, with its reason, before the change", tc.name, evs)
			}
			if l, err := f.q.Link(ctx, f.idpID, "attacker-"+tc.name); err == nil {
				t.Fatalf("%s: the password-proven link %+v survives", tc.name, l)
			}
			// The registered user's own link is not touched by a cut of it.
			reg, err := f.q.Get(ctx, regID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tc.cut(reg); err != nil {
				t.Fatal(err)
			}
			if l, err := f.q.Link(ctx, f.idpID, "own-"+tc.name); err != nil || l.UserID != regID || !l.Registered {
				t.Fatalf("%s: registered link %+v, %v; want it kept", tc.name, l, err)
			}
		}
	})
}

// Migration 00013 makes a verified address one user's per organization.
// Users already sharing one keep it verified for the oldest only, the
// others become unverified, and the unique index then holds.
func TestVerifiedEmailMigrationKeepsTheOldest(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newLinkFixture(t, d)
		// As before the migration: no index, so duplicates could be made.
		if _, err := f.st.Exec(ctx, `DROP INDEX users_verified_email`); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i, addr := range []string{"Dup@example.com", "dup@example.com", "DUP@EXAMPLE.COM", "other@example.com"} {
			id := fmt.Sprintf("dup-%d", i)
			if _, err := f.es.Push(ctx, "test", eventstore.Command{
				Aggregate: eventstore.Aggregate{Type: users.Aggregate, ID: id, ResourceOwner: f.org.ID},
				Events: []eventstore.Pending{{Type: users.EventHumanAdded, Payload: users.HumanAdded{UserName: id, FirstName: "D", LastName: "U",
					Email: addr, EmailVerified: true, PasswordHash: "$argon2id$x"}}},
			}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		dir := "sqlite"
		if d == db.Postgres {
			dir = "postgres"
		}
		raw, err := migrations.FS.ReadFile(dir + "/00013_verified_email_unique.sql")
		if err != nil {
			t.Fatal(err)
		}
		up, _, _ := strings.Cut(strings.SplitN(string(raw), "-- +goose Up", 2)[1], "-- +goose Down")
		for _, stmt := range strings.Split(up, ";") {
			if strings.TrimSpace(stmt) == "" || strings.HasPrefix(strings.TrimSpace(stmt), "--") && !strings.Contains(stmt, "\n") {
				continue
			}
			if _, err := f.st.Exec(ctx, stmt); err != nil {
				t.Fatalf("migration statement %q: %v", stmt, err)
			}
		}
		for i, want := range []bool{true, false, false, true} {
			u, err := f.q.Get(ctx, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if u.EmailVerified != want {
				t.Errorf("%s (%s): verified %v; want %v", ids[i], u.Email, u.EmailVerified, want)
			}
		}
		// The index holds: another verified duplicate is refused.
		_, err = f.es.Push(ctx, "test", eventstore.Command{
			Aggregate: eventstore.Aggregate{Type: users.Aggregate, ID: "dup-late", ResourceOwner: f.org.ID},
			Events: []eventstore.Pending{{Type: users.EventHumanAdded, Payload: users.HumanAdded{UserName: "dup-late", FirstName: "D", LastName: "U",
				Email: "dUp@example.com", EmailVerified: true, PasswordHash: "$argon2id$x"}}},
		})
		if !errors.Is(err, eventstore.ErrUnique) {
			t.Fatalf("a second verified address past the checks: %v; want the index's ErrUnique", err)
		}
	})
}
