package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// slowRequest is a client_credentials request whose body arrives in two
// parts: a request in flight for as long as the test likes.
type slowRequest struct {
	conn net.Conn
	rest string
}

func startSlowRequest(t *testing.T, addr string, m *faultMachine) *slowRequest {
	t.Helper()
	body := url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}.Encode()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /oauth/v2/token HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
		addr, basicAuth(m.clientID, m.secret), len(body), body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	return &slowRequest{conn: conn, rest: body[len(body)/2:]}
}

// finish sends the rest of the body and reads the answer.
func (s *slowRequest) finish() (int, string, error) {
	if _, err := io.WriteString(s.conn, s.rest); err != nil {
		return 0, "", err
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(s.conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, string(body), err
}

// faultDrain sends role SIGTERM under load with GATEHOUSE_DRAIN_DELAY
// 2 s: /readyz answers 503 at once while the process keeps serving for
// the delay, then it stops listening, completes the request it has in
// flight and exits 0; started again, it serves as before.
func faultDrain(t *testing.T, role config.Role) {
	requireFaultSuite(t)
	const drain = 2 * time.Second
	c := startFaultCluster(t, drain)
	l := c.startLoad()
	p := c.proc(role)
	l.noAnswerOK.Store(role == config.RoleEdge)
	slow := startSlowRequest(t, p.addr, c.machines[0])
	time.Sleep(200 * time.Millisecond) // the process reads the headers and starts the handler

	term := time.Now()
	p.signal(syscall.SIGTERM)
	var notReady, closed time.Time
	for closed.IsZero() {
		status, body := p.get("/readyz")
		now := time.Now()
		switch {
		case status == http.StatusServiceUnavailable:
			if notReady.IsZero() {
				notReady = now
			}
		case status == 0:
			closed = now
		case now.Sub(term) > 500*time.Millisecond:
			t.Fatalf("%v after SIGTERM, /readyz = %d %s; want 503 while draining", now.Sub(term).Round(time.Millisecond), status, body)
		}
		if now.Sub(term) > drain+10*time.Second {
			t.Fatalf("%s still listens %v after SIGTERM", role, now.Sub(term).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	switch {
	case notReady.IsZero():
		t.Errorf("/readyz never answered 503 before %s stopped listening", role)
	case notReady.Sub(term) > 500*time.Millisecond:
		t.Errorf("/readyz answered 503 only %v after SIGTERM; want at once", notReady.Sub(term).Round(time.Millisecond))
	}
	if listened := closed.Sub(term); listened < drain || listened > drain+2*time.Second {
		t.Errorf("%s stopped listening %v after SIGTERM; want after the drain delay of %v", role, listened.Round(time.Millisecond), drain)
	}
	status, body, err := slow.finish()
	if err != nil || status != http.StatusOK || !strings.Contains(body, `"access_token"`) {
		t.Errorf("the request in flight at SIGTERM, completed after %s stopped listening: %d %s (%v); want 200 with a token",
			role, status, body, err)
	}
	if code := p.wait(10 * time.Second); code != 0 {
		t.Errorf("%s exited with %d after SIGTERM; want 0", role, code)
	}
	exited := time.Now()
	t.Logf("%s drained: /readyz 503 after %v, stopped listening after %v, exited after %v", role,
		notReady.Sub(term).Round(time.Millisecond), closed.Sub(term).Round(time.Millisecond), exited.Sub(term).Round(time.Millisecond))

	up := time.Now()
	p.start()
	ready := p.waitReady(up, faultRecoveryLimit)
	t.Logf("the new %s process was ready %v after it started", role, ready.Round(time.Millisecond))
	l.awaitRecovery("recovery from the start of the new "+string(role)+" process", up)
	l.finish(term, up)
	// While draining, the process served as usual.
	l.requireStatuses("draining", term, term.Add(drain-200*time.Millisecond), "200", "302")
	allowed := []string{"200", "302", "503"}
	if role == config.RoleEdge {
		allowed = append(allowed, "no answer")
	}
	l.requireStatuses(string(role)+" drained and down, until recovered", term, time.Now(), allowed...)
	if kinds := faultUnaffected[role]; len(kinds) > 0 {
		l.requireServed(string(role)+" drained and down", term, up, kinds...)
	}
}

// TestFaultDrainEdge: SIGTERM to edge under load.
func TestFaultDrainEdge(t *testing.T) { faultDrain(t, config.RoleEdge) }

// TestFaultDrainTokens: SIGTERM to the tokens service under load.
func TestFaultDrainTokens(t *testing.T) { faultDrain(t, config.RoleTokens) }
