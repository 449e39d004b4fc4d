package db

import (
	"strings"
	"testing"
	"time"
)

func TestRebindDollar(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no placeholders", `SELECT 1`, `SELECT 1`},
		{"several", `SELECT * FROM t WHERE a = ? AND b = ? OR c IN (?, ?)`, `SELECT * FROM t WHERE a = $1 AND b = $2 OR c IN ($3, $4)`},
		{"more than nine", strings.Repeat("?,", 11) + "?", "$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12"},
		{"string literal", `SELECT '?' || ?`, `SELECT '?' || $1`},
		{"doubled quote", `SELECT 'it''s ?' = ?`, `SELECT 'it''s ?' = $1`},
		{"backslash is literal in standard strings", `SELECT 'back\' = ?`, `SELECT 'back\' = $1`},
		{"escape string", `SELECT E'it\'s ?' = ?`, `SELECT E'it\'s ?' = $1`},
		{"identifier ending in e is not an escape string", `SELECT note'x\' , ?`, `SELECT note'x\' , $1`},
		{"quoted identifier", `SELECT "we?rd" FROM t WHERE x = ?`, `SELECT "we?rd" FROM t WHERE x = $1`},
		{"line comment", "SELECT ? -- really?\n, ?", "SELECT $1 -- really?\n, $2"},
		{"comment at end", "SELECT ? -- why?", "SELECT $1 -- why?"},
		{"nested block comment", `SELECT /* a /* ? */ still ? */ ?`, `SELECT /* a /* ? */ still ? */ $1`},
		{"dollar quoted", `SELECT $$ ? $$, ?`, `SELECT $$ ? $$, $1`},
		{"tagged dollar quoted", `SELECT $fn$ $$ ? $fn$, ?`, `SELECT $fn$ $$ ? $fn$, $1`},
		{"dollar inside identifier", `SELECT a$b$ FROM t WHERE x = ?`, `SELECT a$b$ FROM t WHERE x = $1`},
		{"unterminated literal", `SELECT 'abc ?`, `SELECT 'abc ?`},
		{"unterminated comment", `SELECT ? /* ?`, `SELECT $1 /* ?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebindDollar(tt.in); got != tt.want {
				t.Errorf("rebindDollar(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRebindPerDialectAndCache(t *testing.T) {
	q := `SELECT x FROM cache_probe WHERE a = ? AND b = ?`
	if got := rebind(SQLite, q); got != q {
		t.Errorf("SQLite rebind = %q; want the text unchanged", got)
	}
	if _, ok := rebindCache.Load(q); ok {
		t.Fatalf("SQLite rebind populated the cache; want it untouched")
	}
	want := `SELECT x FROM cache_probe WHERE a = $1 AND b = $2`
	if got := rebind(Postgres, q); got != want {
		t.Fatalf("Postgres rebind = %q; want %q", got, want)
	}
	v, ok := rebindCache.Load(q)
	if !ok || v.(string) != want {
		t.Fatalf("cache holds %v, %v; want %q", v, ok, want)
	}
	if got := rebind(Postgres, q); got != want {
		t.Errorf("cached Postgres rebind = %q; want %q", got, want)
	}
}

func TestNormalizeArgs(t *testing.T) {
	args := []any{1, "a", []byte("b")}
	if got := normalizeArgs(args); &got[0] != &args[0] {
		t.Errorf("normalizeArgs copied args without times; want the same slice")
	}

	cet := time.FixedZone("CET", 3600)
	local := time.Date(2026, 11, 22, 13, 14, 15, 123456789, cet)
	want := time.Date(2026, 11, 22, 12, 14, 15, 123456000, time.UTC)
	var nilTime *time.Time
	args = []any{"x", local, &local, nilTime}
	got := normalizeArgs(args)
	if args[1].(time.Time) != local {
		t.Errorf("normalizeArgs changed its input")
	}
	for i := 1; i <= 2; i++ {
		tm, ok := got[i].(time.Time)
		if !ok || tm != want || tm.Location() != time.UTC {
			t.Errorf("arg %d = %#v; want %v in UTC", i, got[i], want)
		}
	}
	if got[3] != any(nilTime) {
		t.Errorf("nil *time.Time became %#v; want it unchanged", got[3])
	}
}

func BenchmarkRebindPostgresCached(b *testing.B) {
	q := `SELECT id, name FROM bench_items WHERE org_id = ? AND name = ? AND created_at > ? LIMIT ?`
	rebind(Postgres, q)
	for b.Loop() {
		rebind(Postgres, q)
	}
}

func BenchmarkRebindDollarUncached(b *testing.B) {
	q := `SELECT id, name FROM bench_items WHERE org_id = ? AND name = ? AND note <> 'x?' AND created_at > ? LIMIT ?`
	for b.Loop() {
		rebindDollar(q)
	}
}
