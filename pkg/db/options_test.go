package db_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

func TestOpenRejectsInvalidOptions(t *testing.T) {
	const secret = "hunter2-s3cret"
	dataDir := filepath.Join(t.TempDir(), "data")
	valid := db.Options{
		DataDir:    dataDir,
		Service:    "svc",
		Migrations: fstest.MapFS{"00001_x.sql": {Data: []byte("-- +goose Up\nSELECT 1;\n")}},
		Logger:     slog.New(slog.DiscardHandler),
	}
	tests := []struct {
		name   string
		change func(o *db.Options)
		want   string
	}{
		{"unsupported scheme", func(o *db.Options) { o.URL = "mysql://admin:" + secret + "@127.0.0.1/test" }, `scheme "mysql" is not supported`},
		{"key-value DSN", func(o *db.Options) { o.URL = "host=127.0.0.1 password=" + secret }, "not a URL"},
		{"scheme-less URL", func(o *db.Options) { o.URL = "://admin:" + secret + "@127.0.0.1/test" }, "no valid scheme"},
		{"password with a slash", func(o *db.Options) { o.URL = "postgres://admin:" + secret + "/x@127.0.0.1/test" }, "malformed PostgreSQL URL"},
		{"bad escape in password", func(o *db.Options) { o.URL = "postgresql://admin:%zz" + secret + "@127.0.0.1/test" }, "malformed PostgreSQL URL"},
		{"bad setting", func(o *db.Options) { o.URL = "postgres://admin:" + secret + "@127.0.0.1:5432/test?sslmode=bogus" }, "invalid PostgreSQL URL"},
		{"bad setting, password as a parameter", func(o *db.Options) {
			o.URL = "postgres://admin@127.0.0.1:5432/test?password=" + secret + "&sslmode=bogus"
		}, "invalid PostgreSQL URL"},
		{"unreachable server, password as a parameter", func(o *db.Options) {
			o.URL = "postgres://admin@127.0.0.1:1/test?sslmode=disable&password=" + secret
		}, "connect to PostgreSQL"},
		{"unreachable server", func(o *db.Options) {
			o.URL = "postgres://admin:" + secret + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=3"
		}, "connect to PostgreSQL postgres://admin:xxxxx@127.0.0.1:1/test"},
		{"empty service", func(o *db.Options) { o.Service = "" }, "service name"},
		{"upper-case service", func(o *db.Options) { o.Service = "Users" }, "service name"},
		{"service starting with a digit", func(o *db.Options) { o.Service = "1svc" }, "service name"},
		{"service with a dash", func(o *db.Options) { o.Service = "svc-a" }, "service name"},
		{"service with a path", func(o *db.Options) { o.Service = "../svc" }, "service name"},
		{"service too long", func(o *db.Options) { o.Service = "s" + strings.Repeat("x", 63) }, "service name"},
		{"reserved service", func(o *db.Options) { o.Service = "pg_svc" }, "reserved"},
		{"no migrations", func(o *db.Options) { o.Migrations = nil }, "migrations are required"},
		{"no data directory", func(o *db.Options) { o.DataDir = "" }, "data directory is required"},
		{"data directory with ?", func(o *db.Options) { o.DataDir = filepath.Join(dataDir, "a?b") }, "must not contain '?'"},
		{"no migration files", func(o *db.Options) { o.Migrations = fstest.MapFS{"README": {Data: []byte("x")}} }, "no migrations found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			d, err := db.Open(context.Background(), o)
			if err == nil {
				_ = d.Close()
				t.Fatalf("Open succeeded; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q; want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error = %q; it leaks the password", err)
			}
		})
	}

	// Rejected options never reached the disk, except the last case, which
	// is only detectable after opening the file (and its lock, which stays).
	entries, _ := os.ReadDir(dataDir)
	for _, e := range entries {
		if e.Name() != "svc.db" && e.Name() != "svc.lock" {
			t.Errorf("data directory holds %q after failed opens; want nothing but svc.db and svc.lock", e.Name())
		}
	}
}
