package secrets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
	for _, bad := range []string{"plain", "$argon2id$v=19$m=1,t=1$x$y", "$argon2id$v=19$m=9999999,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5", "$2a$10$short"} {
		if err := CheckPasswordHash(bad); !errors.Is(err, ErrUnknownHash) {
			t.Errorf("CheckPasswordHash(%q) = %v; want ErrUnknownHash", bad, err)
		}
	}
}

// Imported hashes: the parameters set every login attempt's cost, so only
// those within the bounds are accepted.
func TestImportedHashBounds(t *testing.T) {
	argon := func(m, tm, p int) string {
		return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U", m, tm, p)
	}
	bcryptAt := func(cost int) string {
		// A syntactically valid bcrypt hash at any cost, without paying it.
		return fmt.Sprintf("$2a$%02d$%s", cost, strings.Repeat("a", 53))
	}
	for _, ok := range []string{argon(19456, 2, 1), argon(65536, 4, 4), bcryptAt(4), bcryptAt(14)} {
		if err := CheckPasswordHash(ok); err != nil {
			t.Errorf("CheckPasswordHash(%s) = %v; want accepted", ok, err)
		}
	}
	for _, tooCostly := range []string{argon(65537, 1, 1), argon(262144, 10, 1), argon(19456, 5, 1), argon(19456, 2, 5), bcryptAt(15), bcryptAt(31)} {
		if err := CheckPasswordHash(tooCostly); !errors.Is(err, ErrHashCost) {
			t.Errorf("CheckPasswordHash(%s) = %v; want ErrHashCost", tooCostly, err)
		}
	}
}

// At most HashConcurrency hashes run at once, whatever the number of
// concurrent logins; a wait beyond the bound is ErrBusy, never a wrong
// password.
func TestHashConcurrencyIsBounded(t *testing.T) {
	enc, err := HashPassword(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	var peak int32
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // sample the running count
		for {
			select {
			case <-stop:
				return
			default:
				if n := inFlight.Load(); n > 0 {
					mu.Lock()
					peak = max(peak, n)
					mu.Unlock()
				}
			}
		}
	}()
	for range 4 * HashConcurrency() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _, err := VerifyPassword(context.Background(), "pw", enc); !ok || err != nil {
				t.Errorf("Verify = %v %v", ok, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if peak == 0 || int(peak) > HashConcurrency() {
		t.Fatalf("peak of %d hashes at once; want 1..%d", peak, HashConcurrency())
	}

	// Every slot taken and no wait allowed: ErrBusy.
	old := hashWait
	hashWait = 10 * time.Millisecond
	defer func() { hashWait = old }()
	for range HashConcurrency() {
		hashSlots <- struct{}{}
	}
	defer func() {
		for range HashConcurrency() {
			<-hashSlots
		}
	}()
	if _, _, err := VerifyPassword(context.Background(), "pw", enc); !errors.Is(err, ErrBusy) {
		t.Fatalf("Verify with every slot taken = %v; want ErrBusy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HashPassword(ctx, "pw"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Hash with a cancelled context = %v; want context.Canceled", err)
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

// A password check at the current parameters takes its argon2id memory
// from the reused buffers, not the Go heap: 19 MiB of garbage per login
// set the collector's pace and the process's RSS.
func TestPasswordCheckAllocatesNoHashMemory(t *testing.T) {
	enc, err := HashPassword(context.Background(), "pw")
	if err != nil {
		t.Fatal(err)
	}
	const checks = 5
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range checks {
		if ok, _, err := VerifyPassword(context.Background(), "pw", enc); !ok || err != nil {
			t.Fatalf("Verify = %v %v", ok, err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / checks; per > 64<<10 {
		t.Fatalf("a password check allocated %d bytes on the heap; want its %d KiB of argon2id memory reused", per, argonMemory)
	}
}

func TestOrderedTokens(t *testing.T) {
	t.Parallel()
	h, _ := NewHasher(master(1))
	// In a synctest bubble the clock stands still but for the sleep: the
	// time prefixes are exact, and a millisecond apart.
	var a, b string
	var issued time.Time
	synctest.Test(t, func(t *testing.T) {
		issued = time.Now()
		a = NewOrderedToken()
		time.Sleep(time.Millisecond)
		b = NewOrderedToken()
	})
	if len(a) != OrderedTokenLen || len(b) != OrderedTokenLen || a == b {
		t.Fatalf("tokens %q, %q; want two distinct ones of %d characters", a, b, OrderedTokenLen)
	}
	raw, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil || len(raw) != 38 {
		t.Fatalf("token %q is not 38 bytes of base64url: %v", a, err)
	}
	ka, kb := h.TokenKey(a), h.TokenKey(b)
	if len(ka) != 6+sha256.Size || !bytes.Equal(ka[:6], raw[:6]) || !bytes.Equal(ka[6:], h.Hash(a)) {
		t.Fatalf("key of an ordered token: %x; want its 6 time bytes, then its HMAC", ka)
	}
	var ms [8]byte
	copy(ms[2:], ka[:6])
	if got := int64(binary.BigEndian.Uint64(ms[:])); got != issued.UnixMilli() {
		t.Fatalf("time prefix %d ms; want %d, the issue time's", got, issued.UnixMilli())
	}
	// Keys sort by issue time: later tokens append to an index on the key.
	if bytes.Compare(ka, kb) >= 0 {
		t.Fatalf("key of the later token sorts first: %x ≥ %x", ka, kb)
	}
	// Another time prefix (a forgery) gives another HMAC: no record found.
	forged := "AAAAAAAA" + a[8:]
	if k := h.TokenKey(forged); bytes.Equal(k[6:], ka[6:]) {
		t.Fatal("a token with another time prefix has the same HMAC")
	}
	// Tokens issued before ordered tokens keep their plain HMAC key, and so
	// does anything not of the ordered form.
	for _, old := range []string{RandomToken(32), "", a[:50], "!!!!!!!!" + a[8:], "kind_!!!!!!!!" + a[8:]} {
		if !bytes.Equal(h.TokenKey(old), h.Hash(old)) {
			t.Errorf("TokenKey(%q) is not its plain HMAC", old)
		}
	}
	// After a kind prefix, an ordered token is keyed by its time too, and
	// the HMAC covers the prefix.
	if k := h.TokenKey("kind_" + a); !bytes.Equal(k[:6], ka[:6]) || !bytes.Equal(k[6:], h.Hash("kind_"+a)) {
		t.Fatalf("key of a prefixed ordered token: %x; want its time bytes, then the HMAC of the whole", k)
	}
	h2, _ := NewHasher(master(2))
	if bytes.Equal(h2.TokenKey(a), ka) {
		t.Fatal("token key is the same under another master key")
	}
}
