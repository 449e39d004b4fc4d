package argon2

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	upstream "golang.org/x/crypto/argon2"
)

// TestSameAsUpstream: every file but argon2.go is golang.org/x/crypto's
// argon2, byte for byte, at the version go.mod requires; so the copy is
// audited by reading argon2.go's "Gatehouse:" additions alone, and a bump
// of x/crypto that changes argon2 fails here until the copy follows.
func TestSameAsUpstream(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/crypto").Output()
	if err != nil {
		t.Fatalf("go list golang.org/x/crypto: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "argon2")
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("upstream argon2 in %s: %v", dir, err)
	}
	for _, up := range names {
		name := filepath.Base(up)
		if strings.HasSuffix(name, "_test.go") || name == "argon2.go" {
			continue
		}
		want, err := os.ReadFile(up)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("upstream's %s is missing from the copy: %v", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from upstream's %s", name, up)
		}
	}
	// argon2.go: upstream's functions but the three changed ones survive
	// unchanged.
	want, err := os.ReadFile(filepath.Join(dir, "argon2.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("argon2.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range strings.Split(string(want), "\nfunc ")[1:] {
		if strings.HasPrefix(fn, "deriveKey(") || strings.HasPrefix(fn, "initBlocks(") || strings.HasPrefix(fn, "processBlocks(") {
			continue
		}
		if !bytes.Contains(got, []byte("\nfunc "+fn)) && !bytes.Contains(got, []byte("\nfunc "+strings.TrimRight(fn, "\n")+"\n")) {
			t.Errorf("argon2.go: upstream's func %s changed", strings.SplitN(fn, "(", 2)[0])
		}
	}
}

// TestIDKeyInMatchesUpstream derives with IDKeyIn, in one reused and
// dirtied buffer, and with upstream's IDKey, over varied parameters.
func TestIDKeyInMatchesUpstream(t *testing.T) {
	mem := make([]byte, MemoryBytes(1024, 4))
	for i := range mem {
		mem[i] = 0xa5
	}
	for _, p := range []struct {
		time, memory uint32
		threads      uint8
		keyLen       uint32
	}{
		{1, 8, 1, 32}, {2, 64, 1, 32}, {3, 256, 2, 16}, {1, 1024, 4, 64}, {2, 19, 1, 32}, {4, 1000, 3, 32}, {2, 512, 1, 100},
	} {
		for range 3 {
			password, salt := make([]byte, 20), make([]byte, 16)
			_, _ = rand.Read(password)
			_, _ = rand.Read(salt)
			want := upstream.IDKey(password, salt, p.time, p.memory, p.threads, p.keyLen)
			got := IDKeyIn(mem, password, salt, p.time, p.memory, p.threads, p.keyLen)
			if !bytes.Equal(got, want) {
				t.Fatalf("IDKeyIn(t=%d, m=%d, p=%d) = %x, upstream %x", p.time, p.memory, p.threads, got, want)
			}
		}
	}
}

// TestIDKeyVector is RFC 9106's Argon2id test vector (section 5.3).
func TestIDKeyVector(t *testing.T) {
	password := bytes.Repeat([]byte{1}, 32)
	salt := bytes.Repeat([]byte{2}, 16)
	secret := bytes.Repeat([]byte{3}, 8)
	data := bytes.Repeat([]byte{4}, 12)
	mem := make([]byte, MemoryBytes(32, 4))
	got := deriveKeyIn(mem, argon2id, password, salt, secret, data, 3, 32, 4, 32)
	want := []byte{
		0x0d, 0x64, 0x0d, 0xf5, 0x8d, 0x78, 0x76, 0x6c, 0x08, 0xc0, 0x37, 0xa3, 0x4a, 0x8b, 0x53, 0xc9,
		0xd0, 0x1e, 0xf0, 0x45, 0x2d, 0x75, 0xb6, 0x5e, 0xb5, 0x25, 0x20, 0xe9, 0x6b, 0x01, 0xe6, 0x59,
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("RFC 9106 Argon2id vector: got %x", got)
	}
}

func TestIDKeyInRefusesSmallMemory(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("IDKeyIn accepted memory smaller than the parameters need")
		}
	}()
	IDKeyIn(make([]byte, MemoryBytes(64, 1)-1), []byte("p"), []byte("saltsalt"), 1, 64, 1, 32)
}
