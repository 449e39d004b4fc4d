package service_test

import (
	"context"
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
		e.Restart()
		var left []string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			left = nil
			if err := e.DB.Select(ctx, &left, `SELECT subject FROM login_failures ORDER BY subject`); err != nil {
				t.Fatal(err)
			}
			if len(left) == 1 {
				break
			}
		}
		if len(left) != 1 || left[0] != "pair:\"192.0.2.1\":name:org:new" {
			t.Fatalf("login_failures after the start: %v; want only the recent row", left)
		}
	})
}
