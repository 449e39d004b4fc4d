package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// TestReplicasFirstStartTogether: several directory and tokens replicas
// started at the same moment on an empty database all come up, and the
// instance is bootstrapped exactly once.
func TestReplicasFirstStartTogether(t *testing.T) {
	dbURL := testutil.PostgresDatabase(t)
	env := func(role config.Role, dir string) map[string]string {
		return map[string]string{
			"GATEHOUSE_DATABASE_URL":   dbURL,
			"GATEHOUSE_ISSUER":         "http://127.0.0.1:1",
			"GATEHOUSE_MASTER_KEY":     base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32)),
			"GATEHOUSE_INTERNAL_TOKEN": strings.Repeat("r", 40),
			"GATEHOUSE_DATA_DIR":       dir,
			"GATEHOUSE_TOKENS_URL":     "http://127.0.0.1:1",
			"GATEHOUSE_DIRECTORY_URL":  "http://127.0.0.1:1",
			"GATEHOUSE_ADDR":           "127.0.0.1:0",
			"GATEHOUSE_DRAIN_DELAY":    "0s",
		}
	}
	const n = 3
	type started struct {
		role config.Role
		code int
		log  *syncBuffer
	}
	results := make(chan started, 2*n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, role := range []config.Role{config.RoleDirectory, config.RoleTokens} {
		for range n {
			dir := t.TempDir()
			wg.Go(func() {
				log := &syncBuffer{}
				up := make(chan string, 1)
				done := make(chan int, 1)
				e := env(role, dir)
				go func() {
					done <- process.Run(ctx, role, func(k string) string { return e[k] }, log, builds[role], func(a string) { up <- a })
				}()
				select {
				case <-up:
					results <- started{role, -1, log}
					<-done
				case code := <-done:
					results <- started{role, code, log}
				case <-time.After(60 * time.Second):
					results <- started{role, -2, log}
				}
			})
		}
	}
	for range 2 * n {
		r := <-results
		if r.code != -1 {
			t.Errorf("a %s replica did not start (exit %d):\n%s", r.role, r.code, r.log)
		}
	}
	cancel()
	wg.Wait()

	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var orgs, marks int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM directory.orgs`).Scan(&orgs); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM directory.events WHERE event_type = 'instance.bootstrapped'`).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if orgs != 1 || marks != 1 {
		t.Fatalf("%d organizations, %d bootstrap markers; want exactly one each", orgs, marks)
	}
}
