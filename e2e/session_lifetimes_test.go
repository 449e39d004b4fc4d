package e2e

import (
	"net/http"
	"regexp"
	"testing"
	"time"
)

// Session lifetimes through the real server and real time: the server runs
// with an idle lifetime of a few seconds and an absolute one of several, so
// prompt=none keeps working while the browser is active, fails once it was
// idle too long, and fails after the absolute lifetime however active.
//
// Server times are bounded by the client's: a response received at recv
// was decided at or before recv, a request sent at send at or after send,
// so each assertion holds whatever the server's delay.

const (
	slIdle     = 4 * time.Second
	slAbsolute = 10 * time.Second
)

var slPrefilledRE = regexp.MustCompile(`name="loginName" type="text" value="alice@[^"]+"`)

// slAnswer is one prompt=none request: when it was sent and answered, its
// error ("" for a code) and the session of its ID token.
type slAnswer struct {
	send, recv time.Time
	err, desc  string
	sid        string
}

func (e *afEnv) slSilent(c *http.Client) slAnswer {
	e.t.Helper()
	a := slAnswer{send: time.Now()}
	p := afGet(e.t, c, e.authURL("pn", "n-pn", "prompt", "none"))
	a.recv = time.Now()
	if p.loc == nil {
		e.t.Fatalf("prompt=none: status %d without a redirect:\n%s", p.status, p.body)
	}
	if a.err = p.loc.Query().Get("error"); a.err != "" {
		a.desc = p.loc.Query().Get("error_description")
		return a
	}
	a.sid = e.code(p, "pn", "n-pn").claims.SID
	return a
}

// slSignIn signs alice in on a new browser; it returns the browser, the
// session id and bounds of the sign-in's server time.
func (e *afEnv) slSignIn() (c *http.Client, sid string, start, done time.Time) {
	e.t.Helper()
	c = browser(e.t, e.base)
	p := afGet(e.t, c, e.authURL("s1", "n-s1"))
	start = time.Now()
	p = e.password(c, p, "alice", afPassword)
	done = time.Now()
	return c, e.code(p, "s1", "n-s1").claims.SID, start, done
}

func TestSessionLifetimes(t *testing.T) {
	e := afStartEnv(t, map[string]string{
		"GATEHOUSE_SESSION_IDLE_LIFETIME":     slIdle.String(),
		"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": slAbsolute.String(),
	})

	t.Run("activity keeps the session until its absolute lifetime", func(t *testing.T) {
		e := e.with(t)
		c, sid, start, done := e.slSignIn()
		// lastActive bounds the server's last activity from below.
		lastActive := start
		beyondIdle := 0
		for {
			time.Sleep(time.Second)
			a := e.slSilent(c)
			alive := a.recv.Before(lastActive.Add(slIdle)) && a.recv.Before(start.Add(slAbsolute))
			gone := !a.send.Before(done.Add(slAbsolute))
			if a.err == "" {
				if gone {
					t.Fatalf("prompt=none sent %v after the sign-in answered with a code; want login_required after the absolute lifetime %v",
						a.send.Sub(done), slAbsolute)
				}
				if a.sid != sid {
					t.Fatalf("prompt=none: session %s; want the sign-in's %s", a.sid, sid)
				}
				lastActive = a.send
				if a.send.After(done.Add(slIdle)) {
					beyondIdle++
				}
				continue
			}
			if alive {
				t.Fatalf("prompt=none %v after the sign-in, %v after the last activity: %s (%s); want a code",
					a.recv.Sub(start), a.recv.Sub(lastActive), a.err, a.desc)
			}
			if !gone {
				t.Fatalf("prompt=none failed %v after the last activity (%s): the machine stalled longer than the idle lifetime %v, so this run shows nothing",
					a.recv.Sub(lastActive), a.err, slIdle)
			}
			if a.err != "login_required" || a.desc != "the session has expired" {
				t.Errorf("after the absolute lifetime: %s (%s); want login_required (the session has expired)", a.err, a.desc)
			}
			break
		}
		if beyondIdle < 2 {
			t.Errorf("%d codes later than the idle lifetime after the sign-in; want activity to keep the session past it", beyondIdle)
		}
	})

	t.Run("idle expiry", func(t *testing.T) {
		e := e.with(t)
		c, sid, start, _ := e.slSignIn()
		a := e.slSilent(c)
		if a.err != "" || a.sid != sid {
			if a.recv.Before(start.Add(slIdle)) {
				t.Fatalf("prompt=none right after the sign-in: %s (%s), session %s; want a code of %s", a.err, a.desc, a.sid, sid)
			}
			t.Fatalf("the machine took %v to answer, longer than the idle lifetime: this run shows nothing", a.recv.Sub(start))
		}
		time.Sleep(time.Until(a.recv.Add(slIdle + 500*time.Millisecond)))
		idle := e.slSilent(c)
		if idle.err != "login_required" || idle.desc != "the session has expired" {
			t.Fatalf("prompt=none %v after the last activity: error %q (%s); want login_required (the session has expired)",
				idle.send.Sub(a.recv), idle.err, idle.desc)
		}
		if !idle.recv.Before(start.Add(slAbsolute)) {
			t.Fatalf("the machine took until %v after the sign-in: the absolute lifetime may have ended the session, this run shows nothing",
				idle.recv.Sub(start))
		}
		// An interactive request shows the login page for the account;
		// signing in opens a new session.
		p := afGet(t, c, e.authURL("s2", "n-s2"))
		if !afIs(p, "loginName") || !slPrefilledRE.MatchString(p.body) {
			t.Fatalf("want the login page pre-filled with alice's login name; got %d:\n%s", p.status, p.body)
		}
		p = e.password(c, p, "alice", afPassword)
		if again := e.code(p, "s2", "n-s2"); again.claims.SID == sid {
			t.Errorf("sign-in after expiry: sid %s; want a new session", sid)
		}
	})
}
