// Package testutil gives tests real backing services: a private PostgreSQL
// schema and a Redis key prefix per test. When a service is unreachable the
// test is skipped with a clear message, except under CI=true, where it fails:
// CI must exercise every backend.
package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// DefaultPostgresURL is the machine's PostgreSQL (trust auth, database test).
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DefaultRedisURL is the machine's Redis.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// unavailable skips the test, or fails it under CI=true.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true but unreachable: %v", what, err)
	}
	t.Skipf("skipping: %s unreachable (%v); start it or run under CI=true to make this a failure", what, err)
}

// RandomSuffix returns n random bytes as lowercase hex, for unique names.
func RandomSuffix(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PostgresURL returns the URL of the test PostgreSQL server
// (GATEHOUSE_TEST_POSTGRES_URL, default DefaultPostgresURL) after checking it
// answers. Each caller should use its own schema (see PostgresSchema) or a
// unique database URL so tests do not share tables.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("GATEHOUSE_TEST_POSTGRES_URL")
	if u == "" {
		u = DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		unavailable(t, "PostgreSQL at "+redactURL(u), err)
	}
	defer conn.Close(ctx)
	if err := conn.Ping(ctx); err != nil {
		unavailable(t, "PostgreSQL at "+redactURL(u), err)
	}
	return u
}

// PostgresSchemaPrefix returns a PostgreSQL URL plus a unique prefix for the
// schemas a test creates; every schema whose name starts with the prefix is
// dropped when the test ends.
func PostgresSchemaPrefix(t testing.TB) (dbURL, prefix string) {
	t.Helper()
	dbURL = PostgresURL(t)
	prefix = "t" + RandomSuffix(5) + "_"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, prefix+"%")
		if err != nil {
			return
		}
		names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, n := range names {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{n}.Sanitize()+" CASCADE")
		}
	})
	return dbURL, prefix
}

// Redis returns a client for the test Redis server (GATEHOUSE_TEST_REDIS_URL,
// default DefaultRedisURL) and a unique key prefix; keys under the prefix are
// deleted when the test ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	u := RedisURL(t)
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse redis url: %v", err)
	}
	c := redis.NewClient(opts)
	prefix := "test:" + RandomSuffix(6) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		_ = c.Close()
	})
	return c, prefix
}

// RedisURL returns the test Redis URL after checking that it answers.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("GATEHOUSE_TEST_REDIS_URL")
	if u == "" {
		u = DefaultRedisURL
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse redis url: %v", err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, "Redis at "+redactURL(u), err)
	}
	return u
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	return strings.TrimSpace(fmt.Sprint(u.Redacted()))
}

// PostgresDatabase creates a fresh, empty database for the test and returns
// its URL; the database is dropped when the test ends. Use it where code
// under test picks fixed schema names (a whole Gatehouse deployment).
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	name := "gatehouse_test_" + RandomSuffix(6)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		unavailable(t, "PostgreSQL", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse postgres url: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
