package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

func master(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestCipherRoundTripAndBinding(t *testing.T) {
	c, err := NewCipher(master(1), PurposeIdPSecrets)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := c.Encrypt([]byte("client-secret"), []byte("idp-1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte("client-secret")) {
		t.Fatal("ciphertext contains the plaintext")
	}
	pt, err := c.Decrypt(ct, []byte("idp-1"))
	if err != nil || string(pt) != "client-secret" {
		t.Fatalf("Decrypt = %q, %v", pt, err)
	}
	if _, err := c.Decrypt(ct, []byte("idp-2")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other aad: err %v; want ErrDecrypt", err)
	}
	other, _ := NewCipher(master(1), PurposeSigningKeys)
	if _, err := other.Decrypt(ct, []byte("idp-1")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other purpose: err %v; want ErrDecrypt", err)
	}
	otherKey, _ := NewCipher(master(2), PurposeIdPSecrets)
	if _, err := otherKey.Decrypt(ct, []byte("idp-1")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other master key: err %v; want ErrDecrypt", err)
	}
	if _, err := c.Decrypt(ct[:5], nil); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("truncated: err %v; want ErrDecrypt", err)
	}
	if _, err := NewCipher([]byte("short"), PurposeIdPSecrets); err == nil {
		t.Fatal("short master key accepted")
	}
}

func TestHasher(t *testing.T) {
	h, _ := NewHasher(master(1))
	sum := h.Hash("s3cret")
	if !h.Verify("s3cret", sum) || h.Verify("s3cret!", sum) || h.Verify("s3cret", sum[:10]) {
		t.Fatal("Verify wrong")
	}
	h2, _ := NewHasher(master(2))
	if h2.Verify("s3cret", sum) {
		t.Fatal("hash verifies under another master key")
	}
}

func TestPasswords(t *testing.T) {
	enc, err := HashPassword(context.Background(), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash format %q", enc)
	}
	if ok, rehash, err := VerifyPassword(context.Background(), "correct horse", enc); !ok || rehash || err != nil {
		t.Fatalf("Verify(right) = %v %v %v", ok, rehash, err)
	}
	if ok, _, err := VerifyPassword(context.Background(), "wrong", enc); ok || err != nil {
		t.Fatalf("Verify(wrong) = %v %v", ok, err)
	}
	bc, _ := bcrypt.GenerateFromPassword([]byte("imported"), bcrypt.MinCost)
	if err := CheckPasswordHash(string(bc)); err != nil {
		t.Fatalf("bcrypt import refused: %v", err)
	}
	if ok, rehash, err := VerifyPassword(context.Background(), "imported", string(bc)); !ok || !rehash || err != nil {
		t.Fatalf("Verify(bcrypt) = %v %v %v; want ok and rehash", ok, rehash, err)
	}
	for _, bad := range []string{"plain", "$argon2id$v=19$m=1,t=1$x$y", "$2a$10$short"} {
		if err := CheckPasswordHash(bad); !errors.Is(err, ErrUnknownHash) {
			t.Errorf("CheckPasswordHash(%q) = %v; want ErrUnknownHash", bad, err)
		}
	}
}

const (
	testSalt = "c2FsdHNhbHRzYWx0"                            // 12 bytes
	testKey  = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U" // 32 bytes
)

func argonAt(m, tm, p int) string {
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", m, tm, p, testSalt, testKey)
}

// bcryptAt is a syntactically valid bcrypt hash at any cost, without
// paying it.
func bcryptAt(cost int) string { return fmt.Sprintf("$2a$%02d$%s", cost, strings.Repeat("a", 53)) }

// Imported hashes: the parameters set every login attempt's cost, so only
// those within the bounds are accepted, and the refusal names the bound.
func TestImportedHashBounds(t *testing.T) {
	for _, ok := range []string{argonAt(19456, 2, 1), argonAt(65536, 4, 4), argonAt(8, 1, 1), bcryptAt(4), bcryptAt(14),
		strings.Replace(bcryptAt(10), "$2a$", "$2b$", 1), strings.Replace(bcryptAt(10), "$2a$", "$2y$", 1)} {
		if err := CheckPasswordHash(ok); err != nil {
			t.Errorf("CheckPasswordHash(%s) = %v; want accepted", ok, err)
		}
	}
	for h, bound := range map[string]string{
		argonAt(65537, 1, 1):      "m=65537 KiB exceeds 65536 KiB",
		argonAt(262144, 10, 1):    "m=262144 KiB exceeds 65536 KiB",
		argonAt(9999999, 1, 1):    "m=9999999 KiB exceeds 65536 KiB",
		argonAt(19456, 5, 1):      "t=5 exceeds 4",
		argonAt(19456, 2, 5):      "p=5 exceeds 4",
		argonAt(19456, 2, 255):    "p=255 exceeds 4",
		bcryptAt(15):              "bcrypt cost 15 is outside 4-14",
		bcryptAt(31):              "bcrypt cost 31 is outside 4-14",
		bcryptAt(3):               "bcrypt cost 3 is outside 4-14",
		bcryptAt(0):               "bcrypt cost 0 is outside 4-14",
		argonAt(4294967295, 1, 1): "m=4294967295 KiB exceeds 65536 KiB",
	} {
		err := CheckPasswordHash(h)
		if !errors.Is(err, ErrHashCost) || !strings.Contains(err.Error(), bound) {
			t.Errorf("CheckPasswordHash(%s) = %v; want ErrHashCost naming %q", h, err, bound)
		}
	}
}

// Malformed PHC strings and bcrypt encodings are refused, not stored to
// fail every later login.
func TestMalformedHashesRefused(t *testing.T) {
	phc := func(alg, version, params string) string {
		return "$" + alg + "$" + version + "$" + params + "$" + testSalt + "$" + testKey
	}
	for _, bad := range []string{
		"", "$", "$argon2id$", "$argon2id$v=19$m=19456,t=2,p=1$" + testSalt,
		phc("argon2id", "v=19", "m=19456,t=2,p=1,x=5"),     // unknown parameter
		phc("argon2id", "v=19", "m=19456,t=2,p=1,keyid=a"), // keyid is not supported
		phc("argon2id", "v=19", "m=19456,t=2,p=1junk"),
		phc("argon2id", "v=19junk", "m=19456,t=2,p=1"),
		phc("argon2id", "v=16", "m=19456,t=2,p=1"), // argon2 1.0
		phc("argon2id", "v=019", "m=19456,t=2,p=1"),
		phc("argon2id", "v=19", "m= 19456,t=2,p=1"),
		phc("argon2id", "v=19", "m=+19456,t=2,p=1"),
		phc("argon2id", "v=19", "m=-1,t=2,p=1"),
		phc("argon2id", "v=19", "m=019456,t=2,p=1"),
		phc("argon2id", "v=19", "t=2,m=19456,p=1"),
		phc("argon2id", "v=19", "m=19456,t=2"),
		phc("argon2id", "v=19", "m=19456,,t=2,p=1"),
		phc("argon2id", "v=19", "m=0,t=2,p=1"),
		phc("argon2id", "v=19", "m=19456,t=0,p=1"),
		phc("argon2id", "v=19", "m=19456,t=2,p=0"),
		phc("argon2id", "v=19", "m=19456,t=2,p=256"),            // more lanes than argon2 has
		phc("argon2id", "v=19", "m=4294967296,t=2,p=1"),         // overflows uint32
		phc("argon2id", "v=19", "m=19456,t=2,p=1") + "==",       // padded base64
		phc("argon2id", "v=19", "m=19456,t=2,p=1") + "$x",       // a seventh field
		"$argon2id$m=19456,t=2,p=1$" + testSalt + "$" + testKey, // no version
		"$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$" + testKey,      // salt of 4 bytes
		"$argon2id$v=19$m=19456,t=2,p=1$" + testSalt + "$a2V5",  // key of 3 bytes
		"$argon2id$v=19$m=19456,t=2,p=1$" + testSalt + "$a2V5*2V5a2V5a2V5a2V5",
		phc("argon2i", "v=19", "m=19456,t=2,p=1"), // argon2i and argon2d are not supported
		phc("argon2d", "v=19", "m=19456,t=2,p=1"),
		phc("ARGON2ID", "v=19", "m=19456,t=2,p=1"),
		"$2a$10$" + strings.Repeat("!", 53), // outside bcrypt's alphabet
		"$2a$10$" + strings.Repeat("a", 60), // trailing text
		"$2a$10$" + strings.Repeat("a", 52), // one short
		"$2a$1x$" + strings.Repeat("a", 53), // cost not a number
		"$2a$+9$" + strings.Repeat("a", 53), //
		"$2x$10$" + strings.Repeat("a", 53), // unknown minor version
		"$2a$10" + strings.Repeat("a", 54),  // no separator after the cost
		"$1$salt$hash", "{SSHA}abc", "$pbkdf2-sha256$29000$c2FsdA$a2V5",
	} {
		err := CheckPasswordHash(bad)
		if !errors.Is(err, ErrUnknownHash) {
			t.Errorf("CheckPasswordHash(%q) = %v; want ErrUnknownHash", bad, err)
		}
		if ok, _, err := VerifyPassword(context.Background(), "pw", bad); ok || !errors.Is(err, ErrUnknownHash) {
			t.Errorf("VerifyPassword(%q) = %v, %v; want ErrUnknownHash", bad, ok, err)
		}
	}
}

// A hash stored before the import bounds existed is still verified when it
// is within the ceiling of what the format could store (argon2id m ≤ 256
// MiB, t ≤ 10; bcrypt ≤ MaxStoredBcryptCost), one such check at a time in
// addition to the hashing slot, and rehashed at its first success. Beyond
// the ceiling (a bcrypt cost 31 hash takes days) it is refused at once,
// holding no slot.
func TestStoredHashBeyondTheImportBounds(t *testing.T) {
	ctx := context.Background()
	salt := []byte("legacy-salt-0123")
	legacy := fmt.Sprintf("$argon2id$v=19$m=1024,t=6,p=1$%s$%s", b64.EncodeToString(salt),
		b64.EncodeToString(argon2.IDKey([]byte("old"), salt, 6, 1024, 1, 32)))
	if err := CheckPasswordHash(legacy); !errors.Is(err, ErrHashCost) {
		t.Fatalf("CheckPasswordHash(t=6) = %v; want ErrHashCost", err)
	}
	if ok, rehash, err := VerifyPassword(ctx, "old", legacy); !ok || !rehash || err != nil {
		t.Fatalf("Verify(stored t=6) = %v %v %v; want ok and rehash", ok, rehash, err)
	}
	if ok, _, err := VerifyPassword(ctx, "wrong", legacy); ok || err != nil {
		t.Fatalf("Verify(stored t=6, wrong) = %v %v", ok, err)
	}

	// One over-bound check at a time: with that lane taken, another waits
	// (ErrBusy after the bound) while ordinary hashes go on.
	defer setHashWait(hashWait())
	setHashWait(20 * time.Millisecond)
	heavySlots <- struct{}{}
	if _, _, err := VerifyPassword(ctx, "old", legacy); !errors.Is(err, ErrBusy) {
		t.Errorf("Verify(stored t=6) with the over-bound lane taken = %v; want ErrBusy", err)
	}
	current, err := HashPassword(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := VerifyPassword(ctx, "new", current); !ok || err != nil {
		t.Errorf("Verify(current) with the over-bound lane taken = %v %v; want ok", ok, err)
	}
	<-heavySlots

	// Beyond the ceiling: an error at once, no slot taken.
	for _, h := range []string{bcryptAt(MaxStoredBcryptCost + 1), bcryptAt(31), argonAt(262145, 1, 1), argonAt(19456, 11, 1)} {
		done := make(chan error, 1)
		go func() { _, _, err := VerifyPassword(ctx, "pw", h); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrHashCost) {
				t.Errorf("Verify(%s) = %v; want ErrHashCost", h, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("Verify(%s) still running after 3 s; want a refusal at once", h)
		}
	}
	if n := inFlight.Load(); n != 0 {
		t.Fatalf("%d hashes in flight after the refusals", n)
	}
}

// At most HashConcurrency hashes run at once, whatever the number of
// concurrent logins; a wait beyond the bound is ErrBusy, never a wrong
// password.
func TestHashConcurrencyIsBounded(t *testing.T) {
	ctx := context.Background()
	enc, err := HashPassword(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	var peak atomic.Int32
	testHookInSlot = func(n int32) {
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond) // let the others pile up
	}
	defer func() { testHookInSlot = nil }()
	var wg sync.WaitGroup
	for i := range 8 * HashConcurrency() {
		wg.Go(func() {
			var ok bool
			var err error
			switch i % 3 {
			case 0:
				ok, _, err = VerifyPassword(ctx, "pw", enc)
			case 1:
				ok, _, err = VerifyPassword(ctx, "pw", string(bc))
			default:
				_, err = HashPassword(ctx, "pw")
				ok = err == nil
			}
			if !ok || err != nil {
				t.Errorf("hash %d = %v %v", i, ok, err)
			}
		})
	}
	wg.Wait()
	// At least two at once shows that the test ran them concurrently.
	if p := int(peak.Load()); p < 2 || p > HashConcurrency() {
		t.Fatalf("peak of %d hashes at once; want 2..%d", p, HashConcurrency())
	}

	// Every slot taken: after the wait bound ErrBusy; a cancelled or
	// expiring context ends the wait with its error.
	release := Saturate(10 * time.Millisecond)
	start := time.Now()
	if _, _, err := VerifyPassword(ctx, "pw", enc); !errors.Is(err, ErrBusy) || time.Since(start) > time.Second {
		t.Fatalf("Verify with every slot taken = %v after %v; want ErrBusy after the bound", err, time.Since(start))
	}
	if _, err := HashPassword(ctx, "pw"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Hash with every slot taken = %v; want ErrBusy", err)
	}
	setHashWait(time.Minute)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := HashPassword(cctx, "pw"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Hash with a cancelled context = %v; want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer dcancel()
	if _, _, err := VerifyPassword(dctx, "pw", enc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Verify with an expiring context = %v; want context.DeadlineExceeded", err)
	}
	release()
	if hashWait() != defaultHashWait {
		t.Fatalf("hash wait %v after release; want %v", hashWait(), defaultHashWait)
	}
	if ok, _, err := VerifyPassword(ctx, "pw", enc); !ok || err != nil {
		t.Fatalf("Verify after release = %v %v", ok, err)
	}
	// A cancelled context is honoured even with a slot free.
	if _, _, err := VerifyPassword(cctx, "pw", enc); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with a cancelled context and free slots = %v; want context.Canceled", err)
	}
}

// BenchmarkVerifyPasswordConcurrent runs many more concurrent verifications
// than there are slots and reports the peak number running at once, which
// stays at HashConcurrency.
func BenchmarkVerifyPasswordConcurrent(b *testing.B) {
	enc, err := HashPassword(context.Background(), "pw")
	if err != nil {
		b.Fatal(err)
	}
	var peak atomic.Int32
	testHookInSlot = func(n int32) {
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	defer func() { testHookInSlot = nil }()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, _, err := VerifyPassword(context.Background(), "pw", enc); !ok || err != nil {
				b.Errorf("Verify = %v %v", ok, err)
			}
		}
	})
	b.ReportMetric(float64(peak.Load()), "peak-in-flight")
	b.ReportMetric(float64(HashConcurrency()), "bound")
	if int(peak.Load()) > HashConcurrency() {
		b.Fatalf("peak %d > bound %d", peak.Load(), HashConcurrency())
	}
}

func TestIDsAndTokens(t *testing.T) {
	// Far more ids than one millisecond holds, from several goroutines:
	// none repeats, and each goroutine's ids increase.
	const workers, each = 4, 20000
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var prev uint64
			local := make([]string, 0, each)
			for range each {
				id := NewID()
				n, err := strconv.ParseUint(id, 10, 63)
				if err != nil || len(id) < 15 {
					t.Errorf("id %q is not a long decimal below 2^63", id)
					return
				}
				if n <= prev {
					t.Errorf("id %d after %d; want increasing", n, prev)
					return
				}
				prev = n
				local = append(local, id)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %s", id)
					return
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
	if a, b := RandomToken(32), RandomToken(32); a == b || len(a) != 43 {
		t.Fatalf("RandomToken: %q %q", a, b)
	}
	if a, b := NewTokenID(), NewTokenID(); a == b || len(a) != 32 || a[:10] > b[:10] {
		t.Fatalf("NewTokenID: %q %q; want 32 hex digits, time first", a, b)
	}
}
