package management_test

import (
	"context"
	"encoding/base64"
	"maps"
	"strings"
	"testing"
	"time"

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

// usrLegacyArgon is argon2id("legacy-Passw0rd") with t=6 (beyond the
// import bound t ≤ 4, cheap in memory), as stored before the bounds.
const usrLegacyArgon = "$argon2id$v=19$m=1024,t=6,p=1$bGVnYWN5LXNhbHQtMDEyMw$FgLaZvo8knqQCEebEhGlsHUxQemxVctwu/BE00GYln4"

// usrArgonWith is an import body field with an argon2id hash whose version
// and parameter fields are given verbatim.
func usrArgonWith(version, params string) map[string]any {
	return map[string]any{"hashedPassword": map[string]any{
		"value": "$argon2id$" + version + "$" + params + "$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"}}
}

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
		body := func(name string, extra map[string]any) map[string]any {
			b := map[string]any{
				"userName": name,
				"profile":  map[string]any{"firstName": "Grace", "lastName": "Hopper"},
				"email":    map[string]any{"email": "grace@example.com", "isEmailVerified": true},
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
			if evs := e.Events(id); len(evs) != 1 || evs[0].Type != users.EventHumanAdded {
				t.Fatalf("%s: events %v; want one %s", what, evs, users.EventHumanAdded)
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
				{"bcrypt cost 3", body("r22", map[string]any{"hashedPassword": map[string]any{"value": "$2a$03$" + usrBcrypt[7:]}}), 400, 3},
				// Malformed PHC strings and bcrypt encodings: stored, they
				// would lock their user out (no password ever matches).
				{"argon2id with an unknown parameter", body("r23", usrArgonWith("v=19", "m=19456,t=2,p=1,x=5")), 400, 3},
				{"argon2id parameters with trailing text", body("r24", usrArgonWith("v=19", "m=19456,t=2,p=1junk")), 400, 3},
				{"argon2id version with trailing text", body("r25", usrArgonWith("v=19junk", "m=19456,t=2,p=1")), 400, 3},
				{"argon2id parameter with a space", body("r26", usrArgonWith("v=19", "m= 19456,t=2,p=1")), 400, 3},
				{"argon2id parameter with a leading zero", body("r27", usrArgonWith("v=19", "m=019456,t=2,p=1")), 400, 3},
				{"argon2id without version", body("r28", map[string]any{"hashedPassword": map[string]any{
					"value": "$argon2id$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"}}), 400, 3},
				{"argon2i", body("r29", map[string]any{"hashedPassword": map[string]any{
					"value": "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"}}), 400, 3},
				{"bcrypt outside its alphabet", body("r30", map[string]any{"hashedPassword": map[string]any{"value": "$2a$10$" + strings.Repeat("!", 53)}}), 400, 3},
				{"bcrypt with trailing text", body("r31", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt + "xyz"}}), 400, 3},
			}
			for _, tc := range cases {
				usrRefused(t, e, tc.name, "POST", path, e.AdminToken, "", tc.body, tc.status, tc.code)
			}
			// The answer names the bound that was exceeded.
			for _, tc := range []struct {
				value string
				want  []string
			}{
				{"$argon2id$v=19$m=262144,t=10,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U", []string{"m=262144", "65536 KiB"}},
				{"$argon2id$v=19$m=19456,t=5,p=1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U", []string{"t=5", "exceeds 4"}},
				{"$2a$31$" + usrBcrypt[7:], []string{"cost 31", "4-14"}},
				{"$argon2id$v=19$m=19456,t=2,p=1,x=5$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U", []string{"m, t and p"}},
			} {
				r := usrRefused(t, e, tc.value, "POST", path, e.AdminToken, "", body("r32", map[string]any{"hashedPassword": map[string]any{"value": tc.value}}), 400, 3)
				for _, w := range tc.want {
					if !strings.Contains(string(r.Body), w) {
						t.Errorf("refusal of %s: %s; want it to name %q", tc.value, r.Body, w)
					}
				}
			}
			usrRefused(t, e, "no role", "POST", path, e.Intro.Mint(e.SeedUser(e.OrgID, "plain")), "", body("r17", nil), 403, 7)
			before := e.EventCount()
			if r := e.REST("POST", path, e.AdminToken, "", `{"userName": "x",`); r.Status != 400 || r.Code() != 3 || e.EventCount() != before {
				t.Fatalf("malformed JSON: %d %s", r.Status, r.Body)
			}
		})

		login := func(id, pw string) (*connect.Response[directoryv1.VerifyPasswordResponse], error) {
			return e.Internal(mgmttest.InternalToken).VerifyPassword(ctx, connect.NewRequest(&directoryv1.VerifyPasswordRequest{
				OrgId: e.OrgID, UserId: id, Password: pw}))
		}
		setStoredHash := func(t *testing.T, id, hash string) {
			t.Helper()
			if _, err := e.DB.Exec(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, id); err != nil {
				t.Fatal(err)
			}
		}
		const current = "$argon2id$v=19$m=19456,t=2,p=1$"

		t.Run("rehashed at the first login", func(t *testing.T) {
			id, st := imported(t, "bcrypt to rehash", body("rehash", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			if !strings.HasPrefix(st.Hash, "$2") {
				t.Fatalf("stored %q; want the imported bcrypt hash", st.Hash)
			}
			res, err := login(id, "legacy-Passw0rd")
			if err != nil || res.Msg.GetUser().GetId() != id {
				t.Fatalf("login with the imported password: %v", err)
			}
			st = usrStoredUser(t, e, id)
			if !strings.HasPrefix(st.Hash, current) || !verifies("legacy-Passw0rd", st.Hash) || st.ChangeRequired {
				t.Fatalf("after the login the hash is %q (change required %v); want the current argon2id parameters", st.Hash, st.ChangeRequired)
			}

			// The change-required flag stays; the rehash is no password
			// change: no history entry, no end of sessions, and the user
			// can change the password afterwards.
			id, _ = imported(t, "bcrypt to rehash, change required", body("rehash2", map[string]any{
				"hashedPassword": map[string]any{"value": usrBcrypt}, "passwordChangeRequired": true}))
			res, err = login(id, "legacy-Passw0rd")
			if err != nil || !res.Msg.GetChangeRequired() {
				t.Fatalf("login: %v; want success with change required", err)
			}
			if st = usrStoredUser(t, e, id); !strings.HasPrefix(st.Hash, current) || !st.ChangeRequired {
				t.Fatalf("after the login: hash %q, change required %v; want rehashed, still required", st.Hash, st.ChangeRequired)
			}
			evs := e.Events(id)
			if len(evs) != 2 || evs[1].Type != users.EventPasswordRehashed {
				t.Fatalf("events %v; want the import and one %s", evs, users.EventPasswordRehashed)
			}
			var history, cutoffs, untouched int
			if err := e.DB.Get(ctx, &history, `SELECT COUNT(*) FROM password_history WHERE user_id = ?`, id); err != nil || history != 1 {
				t.Fatalf("password history has %d entries (%v); want only the imported one", history, err)
			}
			if err := e.DB.Get(ctx, &cutoffs, `SELECT COUNT(*) FROM user_token_cutoffs WHERE user_id = ?`, id); err != nil || cutoffs != 0 {
				t.Fatalf("%d token cut-offs (%v); the rehash must not end sessions", cutoffs, err)
			}
			if err := e.DB.Get(ctx, &untouched, `SELECT COUNT(*) FROM users WHERE id = ? AND sessions_not_before IS NULL`, id); err != nil || untouched != 1 {
				t.Fatalf("sessions_not_before set (%v); the rehash must not end sessions", err)
			}
			if _, err := login(id, "legacy-Passw0rd"); err != nil || len(e.Events(id)) != 2 {
				t.Fatalf("second login: %v, %d events; want no second rehash", err, len(e.Events(id)))
			}
			if _, err := e.Internal(mgmttest.InternalToken).ChangePassword(ctx, connect.NewRequest(&directoryv1.ChangePasswordRequest{
				UserId: id, CurrentPassword: "legacy-Passw0rd", NewPassword: "Brand-New-Passw0rd"})); err != nil {
				t.Fatalf("password change after the rehash: %v", err)
			}
			if _, err := login(id, "Brand-New-Passw0rd"); err != nil {
				t.Fatalf("login with the new password: %v", err)
			}

			// A hash with the current parameters is not rehashed.
			argon, err := secrets.HashPassword(ctx, "Argon-Passw0rd")
			if err != nil {
				t.Fatal(err)
			}
			id, _ = imported(t, "current argon2id", body("rehash3", map[string]any{"hashedPassword": map[string]any{"value": argon}}))
			if _, err := login(id, "Argon-Passw0rd"); err != nil || len(e.Events(id)) != 1 || usrStoredUser(t, e, id).Hash != argon {
				t.Fatalf("login: %v; events %v; want no rehash of a current hash", err, e.Events(id))
			}
		})

		// Hashes stored before the import bounds existed: within what could
		// be verified they still are (in a hashing slot) and are rehashed at
		// the first login; a cost nobody can wait for is an unusable hash
		// (an error at once, never a slot held for hours).
		t.Run("hashes stored before the bounds", func(t *testing.T) {
			id, _ := imported(t, "legacy argon2id", body("legacy1", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			setStoredHash(t, id, usrLegacyArgon)
			if _, err := login(id, "legacy-Passw0rd"); err != nil {
				t.Fatalf("login with a stored t=6 argon2id hash: %v", err)
			}
			if st := usrStoredUser(t, e, id); !strings.HasPrefix(st.Hash, current) || !verifies("legacy-Passw0rd", st.Hash) {
				t.Fatalf("after the login the hash is %q; want the current argon2id parameters", st.Hash)
			}

			id, _ = imported(t, "legacy bcrypt", body("legacy2", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			cost31 := "$2a$31$" + usrBcrypt[7:]
			setStoredHash(t, id, cost31)
			for i := range secrets.HashConcurrency() + 1 {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				start := time.Now()
				_, err := e.Internal(mgmttest.InternalToken).VerifyPassword(cctx, connect.NewRequest(&directoryv1.VerifyPasswordRequest{
					OrgId: e.OrgID, UserId: id, Password: "legacy-Passw0rd"}))
				cancel()
				if connect.CodeOf(err) != connect.CodeUnauthenticated || time.Since(start) > 3*time.Second {
					t.Fatalf("attempt %d on a bcrypt cost 31 hash: %v after %v; want Unauthenticated at once", i, err, time.Since(start))
				}
			}
			if st := usrStoredUser(t, e, id); st.Hash != cost31 {
				t.Fatalf("stored hash changed to %q", st.Hash)
			}
			// No hashing slot is held: other logins go on.
			other, _ := imported(t, "other user", body("legacy3", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := e.Internal(mgmttest.InternalToken).VerifyPassword(cctx, connect.NewRequest(&directoryv1.VerifyPasswordRequest{
				OrgId: e.OrgID, UserId: other, Password: "legacy-Passw0rd"})); err != nil {
				t.Fatalf("another user's login after the cost-31 attempts: %v", err)
			}
		})

		// With every hashing slot taken past the wait bound, a login is
		// Unavailable (authn shows 503 with Retry-After), never a wrong
		// password, and counts no failure towards the lockout.
		t.Run("overload is not a wrong password", func(t *testing.T) {
			id, _ := imported(t, "user under load", body("busy", map[string]any{"hashedPassword": map[string]any{"value": usrBcrypt}}))
			release := secrets.Saturate(20 * time.Millisecond)
			defer release()
			for i := range 7 { // more than the organization's lockout attempts
				for _, pw := range []string{"legacy-Passw0rd", "wrong"} {
					if _, err := login(id, pw); connect.CodeOf(err) != connect.CodeUnavailable {
						t.Fatalf("attempt %d with every slot taken: %v; want Unavailable", i, err)
					}
				}
			}
			_, err := e.Internal(mgmttest.InternalToken).VerifyPassword(ctx, connect.NewRequest(&directoryv1.VerifyPasswordRequest{
				OrgId: e.OrgID, LoginName: "nobody-here", Password: "x", ClientAddress: "192.0.2.7"}))
			if connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("unknown login name with every slot taken: %v; want Unavailable", err)
			}
			usrRefused(t, e, "import with a password under load", "POST", path, e.AdminToken, "",
				body("busy2", map[string]any{"password": "Imp0rted-Pass"}), 503, 14)
			release()
			if _, err := login(id, "legacy-Passw0rd"); err != nil {
				t.Fatalf("login once the load is gone: %v; want success (no lockout)", err)
			}
		})

		t.Run("every protocol", func(t *testing.T) {
			for _, proto := range mgmttest.Protocols {
				c := e.Client(proto, e.AdminToken, "")
				name := "imp-" + strings.ReplaceAll(proto, "-", "")
				res, err := c.ImportHumanUser(ctx, connect.NewRequest(&managementv1.ImportHumanUserRequest{
					UserName:               name,
					Profile:                &managementv1.ImportHumanUserRequest_Profile{FirstName: "Grace", LastName: "Hopper", PreferredLanguage: "en"},
					Email:                  &managementv1.ImportHumanUserRequest_Email{Email: name + "@example.com"},
					HashedPassword:         &managementv1.ImportHumanUserRequest_HashedPassword{Value: usrBcrypt},
					PasswordChangeRequired: true,
				}))
				if err != nil {
					t.Fatalf("%s: %v", proto, err)
				}
				id := res.Msg.GetUserId()
				usrWantWrite(t, proto, res.Msg.GetDetails(), usrLast(t, e, id))
				got, err := c.GetUserByID(ctx, connect.NewRequest(&managementv1.GetUserByIDRequest{Id: id}))
				if err != nil || got.Msg.GetUser().GetPreferredLoginName() != name+"@acme-corp.localhost" ||
					got.Msg.GetUser().GetHuman().GetProfile().GetDisplayName() != "Grace Hopper" {
					t.Fatalf("%s: read back %v %v", proto, got, err)
				}
				if s := usrStoredUser(t, e, id); s.Hash != usrBcrypt || !s.ChangeRequired {
					t.Fatalf("%s: stored %+v", proto, s)
				}
				_, err = c.ImportHumanUser(ctx, connect.NewRequest(&managementv1.ImportHumanUserRequest{UserName: name}))
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
