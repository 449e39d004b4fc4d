package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
)

// faultFreeze freezes role by SIGSTOP for 20 s under load, then sends
// SIGCONT. Edge answers 503 once its upstream timeout
// (proxy.ResponseHeaderTimeout, 15 s) or its open breaker says so, and a
// service calling the frozen one gives up on its own deadline: no client
// waits for the whole freeze, and the routes that do not need the frozen
// service keep answering.
func faultFreeze(t *testing.T, role config.Role) {
	requireFaultSuite(t)
	// The bound is edge's upstream timeout plus 2 s for a loaded machine
	// (measured on the 2-core development machine: 15.0-15.6 s).
	const freeze, bound = 20 * time.Second, 17 * time.Second
	c := startFaultCluster(t, 0)
	l := c.startLoad()
	p := c.proc(role)
	stopped := time.Now()
	p.signal(syscall.SIGSTOP)
	time.Sleep(freeze)
	cont := time.Now()
	p.signal(syscall.SIGCONT)
	l.awaitRecovery("recovery from SIGCONT", cont)
	l.finish(stopped, cont)
	l.requireStatuses(string(role)+" frozen, until recovered", stopped, time.Now(), "200", "302", "503")
	l.requireServed(string(role)+" frozen", stopped, cont, faultUnaffected[role]...)
	slowest, what := l.slowest(stopped, cont)
	t.Logf("slowest request while %s was frozen for %v: %v, %s", role, freeze, slowest.Round(time.Millisecond), what)
	if slowest >= bound {
		t.Errorf("a client waited %v (%s) while %s was frozen for %v; want less than %v", slowest.Round(time.Millisecond), what, role, freeze, bound)
	}
	// What does not need the frozen service is answered as fast as when
	// it is killed: a service waiting on it gives up on its own call
	// deadline (rpc.InternalCallTimeout) and answers from its caches,
	// long before edge's upstream timeout would count it as failed.
	if kinds := faultUnaffected[role]; len(kinds) > 0 {
		unaffectedBound := rpc.InternalCallTimeout + 2*time.Second
		slow, what := l.slowest(stopped, cont, kinds...)
		t.Logf("slowest request not needing %s while it was frozen: %v, %s", role, slow.Round(time.Millisecond), what)
		if slow >= unaffectedBound {
			t.Errorf("a request that does not need %s waited %v (%s) while it was frozen; want less than %v", role, slow.Round(time.Millisecond), what, unaffectedBound)
		}
	}
}

// TestFaultFreezeTokens: the tokens service frozen by SIGSTOP under load.
func TestFaultFreezeTokens(t *testing.T) { faultFreeze(t, config.RoleTokens) }

// TestFaultFreezeDirectory: the directory frozen by SIGSTOP under load.
func TestFaultFreezeDirectory(t *testing.T) { faultFreeze(t, config.RoleDirectory) }

// TestFaultFreezeAuthn: authn frozen by SIGSTOP under load.
func TestFaultFreezeAuthn(t *testing.T) { faultFreeze(t, config.RoleAuthn) }

// A frozen edge is not tested: no process of Gatehouse stands before it
// to answer for it; its clients' own timeouts and the load balancer's
// readiness probe (/readyz) take it out of rotation.
