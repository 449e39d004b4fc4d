package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/floor"
	"github.com/gatehouse-id/gatehouse/bench/internal/results"
	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

// Issue 14's budgets ("Performance where users outgrow one machine"), and
// issue 4's embedded ones where issue 14 sets none (token-rs256 relative to
// Go's RS256 sign, token-opaque). Server CPU is per request, summed over
// every server process, PostgreSQL and Redis included.
const (
	rs256Factor = 1.05 // embedded token-rs256 ≤ 1.05 × Go's RS256 sign (issue 4)

	embeddedIntrospect = 100 * time.Microsecond
	embeddedES256      = 75 * time.Microsecond
	embeddedOpaque     = 300 * time.Microsecond // issue 4
	embeddedKeysFactor = 1.2                    // × a bare Go server answering the same bytes

	distributedFactor     = 1.3 // × embedded + distributedSlack, every scenario
	distributedSlack      = 100 * time.Microsecond
	distributedIntrospect = 450 * time.Microsecond
	distributedRS256      = 700 * time.Microsecond // with OpenSSL
	distributedKeys       = 130 * time.Microsecond
	edgePerRequest        = 80 * time.Microsecond // edge's own CPU per proxied request

	loginOther = 3 * time.Millisecond // a login's CPU besides the password hash
	// factorStep: login-totp's CPU besides the password hash ≤ 1.15 ×
	// login's, measured in the same run, each first divided by its own
	// hash CPU (issue 26; stepEstimate).
	factorStep = 1.15
	maxRSSMB   = 150 // per process, after the login scenario
	// proofFactor: a DPoP proof check (the server's own, in-process, with
	// the embedded server's replay store) ≤ 1.25 × an ES256 verify,
	// measured in the same run (issue 29; the in-memory store's round
	// trip is part of the check).
	proofFactor = 1.25
)

// check is one budget applied to one measured figure.
type check struct {
	name         string // what is bounded, as printed and in the JSON
	unit         string // "us" or "MB"
	limit, value float64
}

func (c check) met() bool { return c.value <= c.limit }

func (c check) String() string {
	verdict := "met"
	if !c.met() {
		verdict = "MISSED"
	}
	if c.unit == "MB" {
		return fmt.Sprintf("%s ≤ %.0f MB %s", c.name, c.limit, verdict)
	}
	return fmt.Sprintf("%s ≤ %.3f ms %s", c.name, c.limit/1000, verdict)
}

func usCheck(name string, limit, value time.Duration) check {
	return check{name: name, unit: "us", limit: results.US(limit), value: results.US(value)}
}

// checks are the budgets of row r measured in mode; embedded is the same
// run's embedded rows by scenario (nil when it measured none), which the
// distributed budgets are relative to, and same the rows of r's own mode
// (login-totp's budget is relative to login's).
func (b *bench) checks(mode string, r suite.Row, embedded, same map[string]suite.Row) []check {
	if !r.Available || !r.CPUKnown {
		return nil
	}
	cpu := r.CPUPerRequest()
	var out []check
	if mode == "embedded" {
		switch r.Scenario {
		case tokenRS256:
			if sign := b.rs256Sign("go"); sign > 0 {
				out = append(out, usCheck("CPU (1.05 × Go's RS256 sign)", time.Duration(float64(sign)*rs256Factor), cpu))
			}
		case "token-es256":
			out = append(out, usCheck("CPU", embeddedES256, cpu))
		case "token-opaque":
			out = append(out, usCheck("CPU", embeddedOpaque, cpu))
		case "introspect-jwt", "introspect-opaque":
			out = append(out, usCheck("CPU", embeddedIntrospect, cpu))
		case "keys":
			if b.httpCost > 0 {
				out = append(out, usCheck("CPU (1.2 × bare Go server)", time.Duration(float64(b.httpCost)*embeddedKeysFactor), cpu))
			}
		}
	} else {
		if ref, ok := embedded[r.Scenario]; ok && ref.CPUKnown {
			out = append(out, usCheck("CPU (1.3 × embedded + 0.1 ms)",
				time.Duration(float64(ref.CPUPerRequest())*distributedFactor)+distributedSlack, cpu))
		}
		switch r.Scenario {
		case "introspect-jwt", "introspect-opaque":
			out = append(out, usCheck("CPU", distributedIntrospect, cpu))
		case tokenRS256:
			out = append(out, usCheck("CPU", distributedRS256, cpu))
		case "keys":
			out = append(out, usCheck("CPU", distributedKeys, cpu))
		}
		if edge, ok := r.ProcessCPUPerRequest()["edge"]; ok && !r.Kind.IsLogin() {
			out = append(out, usCheck("edge CPU", edgePerRequest, edge))
		}
	}
	if r.Kind == suite.TokenDPoP && mode == "embedded" {
		if verify, check := b.cost(floor.ES256Verify), b.cost(floor.ProofCheck); verify > 0 && check > 0 {
			out = append(out, usCheck("proof check (1.25 × ES256 verify)", time.Duration(float64(verify)*proofFactor), check))
		}
	}
	if r.Kind == suite.LoginTOTP {
		login, ok := same[string(suite.Login)]
		hash, _ := b.loginHash(r)
		loginHash, _ := b.loginHash(login)
		if e, measured := estimateStep(login, r); ok && measured {
			// login-totp's rest at the speed of login's rounds: its rest
			// over its hash, times login's hash (stepEstimate).
			loginRest := login.CPUPerRequest() - loginHash
			out = append(out, usCheck("CPU besides the hash, at login's hash speed (1.15 × login's)",
				time.Duration(float64(loginRest)*factorStep), time.Duration(float64(loginRest)*e.Ratio)))
		} else if ok && login.CPUKnown && hash > 0 && loginHash > 0 {
			out = append(out, usCheck("CPU besides the hash (1.15 × login's)",
				time.Duration(float64(login.CPUPerRequest()-loginHash)*factorStep), cpu-hash))
		}
	}
	if r.Kind == suite.Login {
		if hash, _ := b.loginHash(r); hash > 0 {
			out = append(out, usCheck("CPU besides the hash", loginOther, cpu-hash))
		}
		names := make([]string, 0, len(r.RSSByProcess))
		for name := range r.RSSByProcess {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			out = append(out, check{name: name + " RSS", unit: "MB", limit: maxRSSMB, value: results.MB(r.RSSByProcess[name])})
		}
	}
	return out
}

// targetRecords are checks as the results file holds them.
func targetRecords(cs []check) []results.Target {
	out := make([]results.Target, 0, len(cs))
	for _, c := range cs {
		out = append(out, results.Target{Name: c.name, Unit: c.unit, Limit: results.Round(c.limit), Value: results.Round(c.value), Met: c.met()})
	}
	return out
}

// targetCell is the table's target column: the checks, shortest first.
func targetCell(cs []check) string {
	if len(cs) == 0 {
		return ""
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// byScenario indexes rows by scenario.
func byScenario(rows []suite.Row) map[string]suite.Row {
	out := make(map[string]suite.Row, len(rows))
	for _, r := range rows {
		out[r.Scenario] = r
	}
	return out
}

// embeddedRows are the run's embedded rows by scenario, nil without any.
func embeddedRows(modes []modeResult) map[string]suite.Row {
	for _, m := range modes {
		if m.name == "embedded" {
			out := map[string]suite.Row{}
			for _, r := range m.rows {
				out[r.Scenario] = r
			}
			return out
		}
	}
	return nil
}
