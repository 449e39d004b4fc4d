package management_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// usrBcrypt is bcrypt("legacy-Passw0rd", cost 4), as another system would
// export it.
const usrBcrypt = "$2a$04$6vFpcklHmH5Aa0aeC04jOuMeR9P3O59YhOjfbdR77rNO7JF.f3XM6"

// usrArgonOfLength builds a well-formed argon2id hash of exactly n
// characters (salt and key lengths chosen to fit).
func usrArgonOfLength(t *testing.T, n int) string {
	t.Helper()
	prefix := "$argon2id$v=19$m=19456,t=2,p=1$"
	for salt := 8; salt < 400; salt++ {
		for key := 16; key < 400; key++ {
			h := prefix + base64.RawStdEncoding.EncodeToString(make([]byte, salt)) + "$" + base64.RawStdEncoding.EncodeToString(make([]byte, key))
			if len(h) == n {
				return h
			}
		}
	}
	t.Fatalf("no argon2id hash of %d characters", n)
	return ""
}

type usrStored struct {
	Hash           string `db:"password_hash"`
	ChangeRequired bool   `db:"password_change_required"`
	State          int32  `db:"state"`
	Phone          string `db:"phone"`
}

func usrStoredUser(t *testing.T, e *mgmttest.Env, id string) usrStored {
	t.Helper()
	var s usrStored
	if err := e.DB.Get(context.Background(), &s, `SELECT password_hash, password_change_required, state, phone FROM users WHERE id = ?`, id); err != nil {
		t.Fatalf("stored user %s: %v", id, err)
	}
	return s
}

func TestImportHumanUser(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		const path = "/management/v1/users/human/_import"
		// Each import has its own verified address (one user per address).
		var imports atomic.Int64
		body := func(name string, extra map[string]any) map[string]any {
			b := map[string]any{
				"userName": name,
				"profile":  map[string]any{"firstName": "Grace", "lastName": "Hopper"},
				"email":    map[string]any{"email": fmt.Sprintf("grace-%d@example.com", imports.Add(1)), "isEmailVerified": true},
			}
			maps.Copy(b, extra)
			return b
		}
		imported := func(t *testing.T, what string, b map[string]any) (string, usrStored) {
			t.Helper()
			r := e.REST("POST", path, e.AdminToken, "", b)
			id, _ := r.JSON["userId"].(string)
			if r.Status != 200 || id == "" {
				t.Fatalf("%s: %d %s", what, r.Status, r.Body)
			}
			usrWantWriteJSON(t, what, r, usrLast(t, e, id))
			// A user without a password gets an invitation in the same
			// push (mail is configured here).
			evs := e.Events(id)
			want := []string{users.EventHumanAdded}
			if _, pw := b["password"]; !pw && b["hashedPassword"] == nil {
				want = append(want, users.EventInitCodeAdded)
			}
			if len(evs) != len(want) || evs[0].Type != want[0] || evs[len(evs)-1].Type != want[len(want)-1] {
				t.Fatalf("%s: events %v; want %v", what, evs, want)
			}
			return id, usrStoredUser(t, e, id)
		}
		verifies := func(pw, hash string) bool {
			ok, _, _ := secrets.VerifyPassword(context.Background(), pw, hash)
			return ok
		}

		t.Run("accepted", func(t *testing.T) {
			_, s := imported(t, "clear-text password", body("clear", map[string]any{"password": "Imp0rted-Pass"}))
			if !strings.HasPrefix(s.Hash, "$argon2id$") || !verifies("Imp0rted-Pass", s.Hash) || s.ChangeRequired || s.State != users.StateActive {
				t.Fatalf("clear-text import stored %+v; want an argon2id hash of the password, no change required, active", s)
			}
			_, s = imported(t, "change required", body("required", map[string]any{"password": "Imp0rted-Pass", "passwordChangeRequired": true}))
			if !s.ChangeRequired {
				t.Fatal("passwordChangeRequired true was not stored")
			}
			_, s = imported(t, "bcrypt hash", body("bcrypt", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			if s.Hash != usrBcrypt || !verifies("legacy-Passw0rd", s.Hash) || s.State != users.StateActive || s.ChangeRequired {
				t.Fatalf("bcrypt import stored %+v", s)
			}
			imported(t, "bcrypt hash with algorithm", body("bcrypt2", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt, "algorithm": "bcrypt"}}))
			argon, err := secrets.HashPassword(context.Background(), "Argon-Passw0rd")
			if err != nil {
				t.Fatal(err)
			}
			_, s = imported(t, "argon2id hash", body("argon", map[string]any{"hashedPassword": map[string]any{"value": argon, "algorithm": "argon2id"}}))
			if s.Hash != argon || !verifies("Argon-Passw0rd", s.Hash) {
				t.Fatalf("argon2id import stored %+v", s)
			}
			imported(t, "hash of 500 characters", body("argon500", map[string]any{"hashedPassword": map[string]any{"value": usrArgonOfLength(t, 500)}}))
			_, s = imported(t, "no password", body("nopw", nil))
			if s.State != users.StateInitial || s.Hash != "" {
				t.Fatalf("import without password stored %+v; want state initial", s)
			}
			pw72 := "Aa1" + strings.Repeat("p", 69)
			_, s = imported(t, "password of 72 characters", body("pw72", map[string]any{"password": pw72}))
			if !verifies(pw72, s.Hash) {
				t.Fatal("72-character password not stored")
			}
			phone50 := "+" + strings.Repeat("1", 49)
			_, s = imported(t, "phone of 50 characters", body("phone50", map[string]any{"phone": map[string]any{"phone": phone50}}))
			if s.Phone != phone50 {
				t.Fatalf("phone stored %q", s.Phone)
			}
			imported(t, "user name of 200 characters", body(strings.Repeat("u", 200), nil))
			imported(t, "unknown field ignored", body("unknown-field", map[string]any{"otpCode": "123456"}))
		})

		t.Run("refused", func(t *testing.T) {
			imported(t, "taken name", body("taken", nil))
			bcryptAs := func(alg string) map[string]any {
				return map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt, "algorithm": alg}}
			}
			cases := []struct {
				name   string
				body   any
				status int
				code   int
			}{
				{"password of 73 characters", body("r1", map[string]any{"password": "Aa1" + strings.Repeat("p", 70)}), 400, 3},
				{"password against the policy", body("r2", map[string]any{"password": "short"}), 400, 3},
				{"password and hash", body("r3", map[string]any{"password": "Imp0rted-Pass", "hashedPassword": map[string]any{"value": usrBcrypt}}), 400, 3},
				{"hash of 501 characters", body("r4", map[string]any{"hashedPassword": map[string]any{"value": usrArgonOfLength(t, 501)}}), 400, 3},
				{"algorithm mismatch", body("r5", bcryptAs("argon2id")), 400, 3},
				{"unknown algorithm", body("r6", bcryptAs("md5")), 400, 3},
				{"algorithm without value", body("r7", map[string]any{"hashedPassword": map[string]any{"algorithm": "bcrypt"}}), 400, 3},
				{"unsupported hash", body("r8", map[string]any{"hashedPassword": map[string]any{"value": "$1$salt$hash"}}), 400, 3},
				{"malformed bcrypt", body("r9", map[string]any{"hashedPassword": map[string]any{"value": "$2a$04$short"}}), 400, 3},
				{"phone of 51 characters", body("r10", map[string]any{"phone": map[string]any{"phone": "+" + strings.Repeat("1", 50)}}), 400, 3},
				{"phone without +", body("r11", map[string]any{"phone": map[string]any{"phone": "0441234567"}}), 400, 3},
				{"user name of 201 characters", body(strings.Repeat("u", 201), nil), 400, 3},
				{"user name with a space", body("r 12", nil), 400, 3},
				{"no profile", map[string]any{"userName": "r13", "email": map[string]any{"email": "a@example.com"}}, 400, 3},
				{"first name of 201 characters", body("r14", map[string]any{"profile": map[string]any{"firstName": strings.Repeat("f", 201), "lastName": "L"}}), 400, 3},
				{"no email", body("r15", map[string]any{"email": nil}), 400, 3},
				{"invalid email", body("r16", map[string]any{"email": map[string]any{"email": "not an address"}}), 400, 3},
				{"taken user name", body("taken", nil), 409, 6},
				// The finding's hashes: every login attempt would cost 256 MiB
				// and seconds of CPU.
				{"argon2id beyond the bounds", body("r18", map[string]any{"hashedPassword": map[string]any{
					"value": "$argon2id$v=19$m=262144,t=10,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"}}), 400, 3},
				{"argon2id parallelism beyond the bound", body("r19", map[string]any{"hashedPassword": map[string]any{
					"value": "$argon2id$v=19$m=19456,t=2,p=8$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"}}), 400, 3},
				{"bcrypt cost 31", body("r20", map[string]any{"hashedPassword": map[string]any{"value": "$2a$31$" + strings.Repeat("a", 53)}}), 400, 3},
				{"bcrypt cost 15", body("r21", map[string]any{"hashedPassword": map[string]any{"value": "$2a$15$" + strings.Repeat("a", 53)}}), 400, 3},
			}
			for _, tc := range cases {
				usrRefused(t, e, tc.name, "POST", path, e.AdminToken, "", tc.body, tc.status, tc.code)
			}
			usrRefused(t, e, "no role", "POST", path, e.Intro.Mint(e.SeedUser(e.OrgID, "plain")), "", body("r17", nil), 403, 7)
			before := e.EventCount()
			if r := e.REST("POST", path, e.AdminToken, "", `{"userName": "x",`); r.Status != 400 || r.Code() != 3 || e.EventCount() != before {
				t.Fatalf("malformed JSON: %d %s", r.Status, r.Body)
			}
		})

		t.Run("rehashed at the first login", func(t *testing.T) {
			id, st := imported(t, "bcrypt to rehash", body("rehash", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			if !strings.HasPrefix(st.Hash, "$2") {
				t.Fatalf("stored %q; want the imported bcrypt hash", st.Hash)
			}
			res, err := e.Internal(mgmttest.InternalToken).VerifyPassword(ctx, &directoryv1.VerifyPasswordRequest{
				OrgId: e.OrgID, UserId: id, Password: "legacy-Passw0rd"})
			if err != nil || res.GetUser().GetId() != id {
				t.Fatalf("login with the imported password: %v", err)
			}
			st = usrStoredUser(t, e, id)
			if !strings.HasPrefix(st.Hash, "$argon2id$v=19$m=19456,t=2,p=1$") || !verifies("legacy-Passw0rd", st.Hash) || st.ChangeRequired {
				t.Fatalf("after the login the hash is %q (change required %v); want the current argon2id parameters", st.Hash, st.ChangeRequired)
			}
		})

		t.Run("every protocol", func(t *testing.T) {
			for _, proto := range mgmttest.Protocols {
				c := e.Client(proto, e.AdminToken, "")
				name := "imp-" + strings.ReplaceAll(proto, "-", "")
				res, err := c.ImportHumanUser(ctx, &managementv1.ImportHumanUserRequest{
					UserName:               name,
					Profile:                &managementv1.ImportHumanUserRequest_Profile{FirstName: "Grace", LastName: "Hopper", PreferredLanguage: "en"},
					Email:                  &managementv1.ImportHumanUserRequest_Email{Email: name + "@example.com"},
					HashedPassword:         &managementv1.ImportHumanUserRequest_HashedPassword{Value: usrBcrypt},
					PasswordChangeRequired: true,
				})
				if err != nil {
					t.Fatalf("%s: %v", proto, err)
				}
				id := res.GetUserId()
				usrWantWrite(t, proto, res.GetDetails(), usrLast(t, e, id))
				got, err := c.GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: id})
				if err != nil || got.GetUser().GetPreferredLoginName() != name+"@acme-corp.localhost" ||
					got.GetUser().GetHuman().GetProfile().GetDisplayName() != "Grace Hopper" {
					t.Fatalf("%s: read back %v %v", proto, got, err)
				}
				if s := usrStoredUser(t, e, id); s.Hash != usrBcrypt || !s.ChangeRequired {
					t.Fatalf("%s: stored %+v", proto, s)
				}
				_, err = c.ImportHumanUser(ctx, &managementv1.ImportHumanUserRequest{UserName: name})
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("%s: import without profile: %v; want InvalidArgument", proto, err)
				}
			}
		})

		t.Run("restart", func(t *testing.T) {
			id, _ := imported(t, "before restart", body("durable", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			e.Restart()
			if s := usrStoredUser(t, e, id); s.Hash != usrBcrypt {
				t.Fatalf("after restart: %+v", s)
			}
			if r := e.REST("GET", "/management/v1/users/"+id, e.AdminToken, "", nil); r.Status != 200 {
				t.Fatalf("read after restart: %d", r.Status)
			}
		})
	})
}
