package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// One process owns a data directory's SQLite files: a second embedded
// Gatehouse started on it exits non-zero with a message naming the
// directory, instead of serving beside the first from a revocation list
// and caches the first changes under it. The first keeps serving. The lock
// is the kernel's: once the first is killed (SIGKILL, nothing released by
// hand) the directory can be started again.
func TestSQLiteDataHasOneOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := freeAddr(t)
	env := func(addr string) map[string]string {
		return map[string]string{
			"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": "http://" + first,
			"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e", "GATEHOUSE_DRAIN_DELAY": "0s",
		}
	}
	owner := newOSProc(t, config.RoleEdge, env(first))
	owner.start()
	owner.waitReady(time.Now(), 60*time.Second)

	second := newOSProc(t, config.RoleEdge, env(freeAddr(t)))
	second.start()
	abs, _ := filepath.Abs(dir)
	if code := second.wait(60 * time.Second); code == 0 || !strings.Contains(second.log.String(), "another process holds the") ||
		!strings.Contains(second.log.String(), abs) {
		t.Fatalf("second process on one data directory: exit %d; want non-zero, naming %s:\n%s", code, abs, lastLines(second.log.String(), 20))
	}
	if status, body := owner.get("/readyz"); status != http.StatusOK {
		t.Fatalf("the owner after the refused start: /readyz %d %s", status, body)
	}

	owner.kill()
	second.start()
	second.waitReady(time.Now(), 60*time.Second)
}
