package e2e

import (
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// faultUnaffected lists, for each service, the kinds of request that do
// not need it: they must keep working while it is down. Tokens issues,
// introspects and revokes for known clients and users from its caches of
// the directory (dircache: bounded by GATEHOUSE_CACHE_MAX_STALE).
var faultUnaffected = map[config.Role][]string{
	config.RoleTokens:    {kindCreateUser, kindMetadata, kindAuthorize},
	config.RoleDirectory: {kindToken, kindIntrospect, kindRevoke},
	config.RoleAuthn:     {kindToken, kindIntrospect, kindRevoke, kindCreateUser, kindMetadata},
}

// faultKill kills role with SIGKILL under load, leaves it down for
// faultDown and starts it again.
func faultKill(t *testing.T, role config.Role) {
	requireFaultSuite(t)
	c := startFaultCluster(t, 0)
	l := c.startLoad()
	p := c.proc(role)
	l.noAnswerOK.Store(role == config.RoleEdge)
	down := time.Now()
	p.kill()
	time.Sleep(faultDown)
	up := time.Now()
	p.start()
	ready := p.waitReady(up, faultRecoveryLimit)
	t.Logf("%s killed for %v; the new process was ready %v after it started", role, up.Sub(down).Round(time.Millisecond), ready.Round(time.Millisecond))
	l.awaitRecovery("recovery from the start of the new "+string(role)+" process", up)
	l.finish(down, up)
	allowed := []string{"200", "302", "503"}
	if role == config.RoleEdge {
		allowed = append(allowed, "no answer")
	}
	l.requireStatuses(string(role)+" killed, until recovered", down, time.Now(), allowed...)
	if kinds := faultUnaffected[role]; len(kinds) > 0 {
		l.requireServed(string(role)+" down", down, up, kinds...)
	}
}

// TestFaultKillTokens: kill -9 of the tokens service under load.
func TestFaultKillTokens(t *testing.T) { faultKill(t, config.RoleTokens) }

// TestFaultKillDirectory: kill -9 of the directory under load.
func TestFaultKillDirectory(t *testing.T) { faultKill(t, config.RoleDirectory) }

// TestFaultKillAuthn: kill -9 of authn under load (authorize requests).
func TestFaultKillAuthn(t *testing.T) { faultKill(t, config.RoleAuthn) }

// TestFaultKillEdge: kill -9 of edge under load; clients get no answer
// while it is down and reconnect to the restarted edge.
func TestFaultKillEdge(t *testing.T) { faultKill(t, config.RoleEdge) }
