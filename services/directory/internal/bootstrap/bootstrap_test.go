package bootstrap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/logging"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/bootstrap"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

func TestFirstStart(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st := storetest.Open(t, d)
		es := eventstore.New(st, nil)
		projections.RegisterAll(es)
		dir := t.TempDir()
		var console bytes.Buffer
		o := bootstrap.Options{ES: es, IssuerHost: "id.example.com", DataDir: dir, Console: &console, Logger: logging.Discard(), Now: time.Now}
		if err := bootstrap.Run(ctx, o); err != nil {
			t.Fatal(err)
		}
		var n int
		_ = st.Get(ctx, &n, `SELECT COUNT(*) FROM events`)

		// The key file: 0600, the documented format, its key registered.
		path := filepath.Join(dir, "bootstrap-admin-key.json")
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v %v", fi, err)
		}
		raw, _ := os.ReadFile(path)
		var kf struct{ Type, KeyID, Key, UserID string }
		if err := json.Unmarshal(raw, &kf); err != nil || kf.Type != "serviceaccount" || kf.UserID == "" ||
			!regexp.MustCompile(`^-----BEGIN RSA PRIVATE KEY-----`).MatchString(kf.Key) {
			t.Fatalf("key file content %s", raw)
		}
		uq := &users.Queries{DB: st}
		k, err := uq.MachineKey(ctx, kf.KeyID)
		if err != nil || k.UserID != kf.UserID {
			t.Fatalf("registered key %v %v", k, err)
		}
		machine, _ := uq.Get(ctx, kf.UserID)
		if machine.UserName != "bootstrap-admin" || machine.Type != users.TypeMachine {
			t.Fatalf("machine user %+v", machine)
		}

		// The generated admin password: in a 0600 file the console names,
		// never on the console itself; valid; must be changed.
		pwPath := filepath.Join(dir, bootstrap.PasswordFileName)
		raw, rerr := os.ReadFile(pwPath)
		fi, serr := os.Stat(pwPath)
		if rerr != nil || serr != nil || fi.Mode().Perm() != 0o600 || !strings.Contains(console.String(), pwPath) {
			t.Fatalf("password file %s: %v %v %v; console %q", pwPath, rerr, serr, fi, console.String())
		}
		m := []string{"", strings.TrimSpace(string(raw))}
		if strings.Contains(console.String(), m[1]) {
			t.Fatal("the generated password was printed")
		}
		var admin users.User
		if err := st.Get(ctx, &admin, `SELECT `+users.Columns+users.From+` WHERE u.user_name = 'admin'`); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := secrets.VerifyPassword(context.Background(), m[1], admin.PasswordHash); !ok || !admin.PasswordChangeRequired {
			t.Fatalf("printed password verifies=%v, change required=%v", ok, admin.PasswordChangeRequired)
		}
		if admin.LoginName() != "admin@gatehouse.id.example.com" {
			t.Fatalf("admin login name %s", admin.LoginName())
		}
		oq := &orgs.Queries{DB: st}
		for _, id := range []string{admin.ID, machine.ID} {
			roles, _ := oq.Roles(ctx, id, admin.OrgID)
			if !slices.Contains(roles, orgs.RoleIAMOwner) {
				t.Fatalf("user %s roles %v; want IAM_OWNER", id, roles)
			}
		}

		// A second start changes nothing and prints nothing.
		console.Reset()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := bootstrap.Run(ctx, o); err != nil {
			t.Fatal(err)
		}
		var n2 int
		_ = st.Get(ctx, &n2, `SELECT COUNT(*) FROM events`)
		if n2 != n || console.Len() != 0 {
			t.Fatalf("second start: events %d -> %d, printed %q", n, n2, console.String())
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatal("second start rewrote the key file")
		}
	})
}

func TestConfiguredPasswordAndResume(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, db.SQLite)
	es := eventstore.New(st, nil)
	projections.RegisterAll(es)
	// An interrupted first start: the org exists, nothing else.
	if _, _, err := (&orgs.Commands{ES: es, IssuerHost: "localhost"}).AddOrg(ctx, "x", bootstrap.OrgName, nil); err != nil {
		t.Fatal(err)
	}
	var console bytes.Buffer
	o := bootstrap.Options{ES: es, IssuerHost: "localhost", DataDir: t.TempDir(), AdminPassword: "Operator-Chosen-1", Console: &console, Logger: logging.Discard(), Now: time.Now}
	if err := bootstrap.Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	var count int
	_ = st.Get(ctx, &count, `SELECT COUNT(*) FROM orgs`)
	if count != 1 || console.Len() != 0 {
		t.Fatalf("orgs %d, printed %q; want the existing org reused and nothing printed", count, console.String())
	}
	var admin users.User
	if err := st.Get(ctx, &admin, `SELECT `+users.Columns+users.From+` WHERE u.user_name = 'admin'`); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := secrets.VerifyPassword(context.Background(), "Operator-Chosen-1", admin.PasswordHash); !ok || admin.PasswordChangeRequired {
		t.Fatalf("configured password: verifies=%v change=%v", ok, admin.PasswordChangeRequired)
	}
	weak := o
	weak.AdminPassword = "weak"
	st2 := storetest.Open(t, db.SQLite)
	es2 := eventstore.New(st2, nil)
	projections.RegisterAll(es2)
	weak.ES = es2
	if err := bootstrap.Run(ctx, weak); err == nil {
		t.Fatal("a weak GATEHOUSE_ADMIN_PASSWORD was accepted")
	}
}
