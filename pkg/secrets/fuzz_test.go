package secrets

import (
	"context"
	"testing"
)

// FuzzCheckPasswordHash: any imported hash is accepted or refused without
// a panic, and one that passes the import check verifies without error.
func FuzzCheckPasswordHash(f *testing.F) {
	f.Add("$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA")
	f.Add("$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy")
	f.Add("$argon2id$v=19$m=99999999,t=1,p=1$$")
	f.Add("$2b$99$x")
	f.Add("")
	f.Fuzz(func(t *testing.T, encoded string) {
		if CheckPasswordHash(encoded) != nil {
			return
		}
		if _, _, err := VerifyPassword(context.Background(), "password", encoded); err != nil {
			t.Fatalf("CheckPasswordHash accepted %q but VerifyPassword failed: %v", encoded, err)
		}
	})
}
