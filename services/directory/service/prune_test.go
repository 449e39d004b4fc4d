package service_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// TestServicePrunesLoginFailures: the service prunes failed-password
// counters in the background from its start (and stops doing so on Close:
// Restart would hang otherwise).
func TestServicePrunesLoginFailures(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		for subject, at := range map[string]time.Time{
			"pair:\"192.0.2.1\":name:org:old": time.Now().Add(-lockout.Retention - time.Hour),
			"pair:\"192.0.2.1\":name:org:new": time.Now().Add(-time.Hour),
		} {
			if _, err := e.DB.Exec(ctx, `INSERT INTO login_failures (subject, account, failures, updated_at) VALUES (?, ?, 1, ?)`,
				subject, "name:org:x", at); err != nil {
				t.Fatal(err)
			}
		}
		rounds := make(pruneRounds, 1)
		e.Logger = slog.New(rounds)
		e.Restart()
		select {
		case msg := <-rounds:
			if msg != "db: pruned" {
				t.Fatalf("the first prune round: %q", msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no prune round within 10s of the start")
		}
		var left []string
		if err := e.DB.Select(ctx, &left, `SELECT subject FROM login_failures ORDER BY subject`); err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0] != "pair:\"192.0.2.1\":name:org:new" {
			t.Fatalf("login_failures after the start: %v; want only the recent row", left)
		}
	})
}

// pruneRounds is a log handler that passes on how each round of the
// pruner ended (the message of its log line), when there is room.
type pruneRounds chan string

func (pruneRounds) Enabled(context.Context, slog.Level) bool { return true }

func (r pruneRounds) Handle(_ context.Context, rec slog.Record) error {
	if strings.HasPrefix(rec.Message, "db: prune") {
		select {
		case r <- rec.Message:
		default:
		}
	}
	return nil
}

func (r pruneRounds) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r pruneRounds) WithGroup(string) slog.Handler      { return r }
