package contexts

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStoreIsPrivateAndRoundTrips(t *testing.T) {
	dir := t.TempDir()
	s := Store{Path: filepath.Join(dir, "gatehouse", "contexts.json")}
	f, err := s.Load()
	if err != nil || len(f.Contexts) != 0 {
		t.Fatalf("a missing file: %v %v", f, err)
	}
	f.Contexts["prod"] = &Context{Issuer: "https://id.example.com", Kind: KindBrowser, RefreshToken: "secret-refresh"}
	f.Current = "prod"
	if err := s.Save(f); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(s.Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", st.Mode(), err)
	}
	if st, _ := os.Stat(filepath.Dir(s.Path)); st.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v; want 0700", st.Mode())
	}
	g, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	name, c, err := g.Get("")
	if err != nil || name != "prod" || c.RefreshToken != "secret-refresh" {
		t.Fatalf("Get: %q %+v %v", name, c, err)
	}
	if _, _, err := g.Get("nope"); err == nil {
		t.Fatal("an unknown context was found")
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(filepath.Dir(s.Path))
	if len(entries) != 1 {
		t.Fatalf("files: %v", entries)
	}
}
