package suite

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
)

// Kind is one measured operation.
type Kind string

// The scenarios of `make bench`. A Kind is its scenario's name, except
// TokenJWT, which is named after the server's algorithm (see Name).
const (
	TokenJWT         Kind = "token-jwt"         // client_credentials, JWT access token
	TokenOpaque      Kind = "token-opaque"      // client_credentials, opaque access token
	IntrospectJWT    Kind = "introspect-jwt"    // introspection of a JWT access token
	IntrospectOpaque Kind = "introspect-opaque" // introspection of an opaque access token
	Keys             Kind = "keys"              // GET of the key set
	Login            Kind = "login"             // a whole browser sign-in, code flow with PKCE
	LoginTOTP        Kind = "login-totp"        // the same sign-in with a TOTP code after the password
	DevicePoll       Kind = "device-poll"       // a device polling for its pending authorization (RFC 8628)
	PAR              Kind = "par"               // a pushed authorization request (RFC 9126)
	TokenDPoP        Kind = "token-dpop"        // token-opaque with a DPoP proof (RFC 9449)
	IntrospectDPoP   Kind = "introspect-dpop"   // introspection of a DPoP-bound JWT access token
)

// IsLogin reports whether k signs a person in (checks a password).
func (k Kind) IsLogin() bool { return k == Login || k == LoginTOTP }

// Names are the stable names of the scenarios every run covers, in report
// order. Results are compared across runs by these names: never rename one.
var Names = []string{"token-rs256", "token-es256", "token-opaque", "introspect-jwt", "introspect-opaque", "keys", "login", "login-totp",
	"device-poll", "par", "token-dpop", "introspect-dpop"}

// Name is the stable name of kind k on a server signing with algorithm.
func Name(k Kind, algorithm string) string {
	if k == TokenJWT {
		return "token-" + strings.ToLower(algorithm)
	}
	return string(k)
}

// Target is a running Gatehouse.
type Target struct {
	Base      string // edge's base URL, which is also the issuer
	KeyFile   string // bootstrap-admin-key.json written by directory
	Algorithm string // the signing algorithm the server was started with
	// CPU returns the CPU time each server process has used so far, by
	// process name; nil means server CPU is not measured.
	CPU func(context.Context) (map[string]time.Duration, error)
	// RSS returns each server process's resident set size in bytes, by
	// process name; nil means memory is not measured.
	RSS func(context.Context) (map[string]int64, error)
	// HashCPU returns the CPU time the server's password hashes have
	// taken so far, as it counts them (gatehouse_password_hash_cpu_seconds
	// on /metrics); nil means the login's split is not measured.
	HashCPU func(context.Context) (time.Duration, error)
}

// Options size each scenario.
type Options struct {
	Client *http.Client // see load.NewClient
	Warmup int          // requests sent, and not measured, first
	// WarmupTime is the least time the warm-up lasts (more rounds of
	// Warmup requests): a fresh server's CPU per request falls for
	// seconds while its heap grows (page faults) and caches fill.
	WarmupTime  time.Duration
	Requests    int // measured requests
	Concurrency int
	// LoginRequests is the number of measured logins; 0 means Requests.
	LoginRequests int
}

// size is the warm-up and measured count of kind k: a login costs a
// hundred times a token (argon2id), so it has its own, smaller count.
func (o Options) size(k Kind) (warmup, requests int) {
	if !k.IsLogin() || o.LoginRequests == 0 {
		return o.Warmup, o.Requests
	}
	return min(o.Warmup, max(o.LoginRequests/10, 1)), o.LoginRequests
}

// Row is one scenario's outcome.
type Row struct {
	Scenario  string // stable name, one of Names
	Kind      Kind
	Algorithm string // the server's signing algorithm
	Available bool   // false when the server does not serve the endpoint yet
	Note      string // why a scenario is not available
	Result    load.Result
	// CPU is the server CPU used during the measured requests, the sum of
	// CPUByProcess; CPUKnown is false when the Target has no CPU reading.
	CPU          time.Duration
	CPUByProcess map[string]time.Duration
	CPUKnown     bool
	// RSSByProcess is each server process's resident set size in bytes
	// after the scenario; nil when the Target has no RSS reading.
	RSSByProcess map[string]int64
	// HashCPU is the part of CPU the server spent in password hashes
	// during the measured requests, as it counts them; HashKnown is false
	// when it was not read (any scenario but login, or no HashCPU).
	HashCPU   time.Duration
	HashKnown bool
	// Rounds are the measured shares of a scenario measured in rounds
	// beside another (login and login-totp), in order: each round's
	// requests, server CPU and hash CPU, for an estimate of how far the
	// sums can be trusted. Nil unless both CPU and the hash were read.
	Rounds []Round
}

// Round is one round's share of a Row.
type Round struct {
	Requests     int
	CPU, HashCPU time.Duration
}

// HashPerRequest is the password hashing charged to each measured request.
func (r Row) HashPerRequest() time.Duration {
	return perRequest(r.HashCPU, r.Result.Requests)
}

// CPUPerRequest is the server CPU charged to each measured request.
func (r Row) CPUPerRequest() time.Duration {
	return perRequest(r.CPU, r.Result.Requests)
}

// ProcessCPUPerRequest is the CPU of each server process per measured
// request.
func (r Row) ProcessCPUPerRequest() map[string]time.Duration {
	out := make(map[string]time.Duration, len(r.CPUByProcess))
	for name, cpu := range r.CPUByProcess {
		out[name] = perRequest(cpu, r.Result.Requests)
	}
	return out
}

func perRequest(cpu time.Duration, requests int) time.Duration {
	if requests == 0 {
		return 0
	}
	return cpu / time.Duration(requests)
}

// Run measures each kind in order on t. A scenario whose endpoint answers
// 404 is reported as not available; any other setup failure, or ctx ending,
// stops the run and is returned with the rows measured so far.
//
// Login and LoginTOTP, when one follows the other, are measured in
// LoginRounds alternating rounds (an interleaved A/B): login-totp's target
// is relative to login's, and a difference of a millisecond beside a
// 20 ms hash is lost in the machine's drift between two runs one after
// the other. Each round's share is kept (Row.Rounds).
func Run(ctx context.Context, t Target, f *Fixture, kinds []Kind, o Options) ([]Row, error) {
	var rows []Row
	for i := 0; i < len(kinds); i++ {
		group, rounds := kinds[i:i+1], 1
		if kinds[i] == Login && i+1 < len(kinds) && kinds[i+1] == LoginTOTP {
			group, rounds = kinds[i:i+2], LoginRounds
			i++
		}
		got, err := runGroup(ctx, t, f, group, rounds, o)
		rows = append(rows, got...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// LoginRounds is how many alternating rounds measure login and login-totp.
const LoginRounds = 20

// runGroup warms each of ks up, then measures them in turn, rounds times,
// each round a share of its requests, with CPU readings around each
// share; then it reads the memory.
func runGroup(ctx context.Context, t Target, f *Fixture, ks []Kind, rounds int, o Options) ([]Row, error) {
	rows := make([]Row, len(ks))
	ops := make([]load.Op, len(ks))
	for i, k := range ks {
		rows[i] = Row{Scenario: Name(k, t.Algorithm), Kind: k, Algorithm: t.Algorithm, Available: true}
		op, err := build(ctx, o.Client, t, f, k)
		var unavailable *notAvailable
		switch {
		case errors.As(err, &unavailable):
			rows[i].Available, rows[i].Note = false, unavailable.Error()
			continue
		case err != nil:
			return rows[:i], fmt.Errorf("%s: %w", rows[i].Scenario, err)
		}
		warmup, _ := o.size(k)
		lo := load.Options{Client: o.Client, Requests: warmup, Concurrency: o.Concurrency}
		for start := time.Now(); ; {
			if _, err := load.RunOp(ctx, lo, op); err != nil {
				return rows[:i], fmt.Errorf("%s warm-up: %w", rows[i].Scenario, err)
			}
			if warmup == 0 || time.Since(start) >= o.WarmupTime {
				break
			}
		}
		ops[i] = op
	}
	for round := range rounds {
		for i, k := range ks {
			if ops[i] == nil {
				continue
			}
			_, requests := o.size(k)
			n := requests / rounds
			if round < requests%rounds {
				n++
			}
			if n == 0 {
				continue // fewer requests than rounds
			}
			if err := measure(ctx, t, o, ops[i], n, &rows[i]); err != nil {
				return rows, fmt.Errorf("%s: %w", rows[i].Scenario, err)
			}
		}
	}
	if t.RSS != nil {
		rss, err := t.RSS(ctx)
		if err != nil {
			return rows, fmt.Errorf("%s: server memory: %w", ks[len(ks)-1], err)
		}
		for i := range rows {
			if ops[i] != nil {
				rows[i].RSSByProcess = rss
			}
		}
	}
	return rows, nil
}

// measure sends n requests of op and adds them, and the server CPU they
// used, to row.
func measure(ctx context.Context, t Target, o Options, op load.Op, n int, row *Row) error {
	var (
		hashBefore time.Duration
		before     map[string]time.Duration
		err        error
	)
	readHash := row.Kind.IsLogin() && t.HashCPU != nil
	if readHash {
		if hashBefore, err = t.HashCPU(ctx); err != nil {
			return fmt.Errorf("password hash CPU: %w", err)
		}
	}
	if t.CPU != nil {
		if before, err = t.CPU(ctx); err != nil {
			return fmt.Errorf("server CPU: %w", err)
		}
	}
	res, err := load.RunOp(ctx, load.Options{Client: o.Client, Requests: n, Concurrency: o.Concurrency}, op)
	if err != nil {
		return err
	}
	row.Result = row.Result.Add(res)
	round := Round{Requests: res.Requests}
	if t.CPU != nil {
		after, err := t.CPU(ctx)
		if err != nil {
			return fmt.Errorf("server CPU: %w", err)
		}
		byProcess, total, err := cpuDelta(before, after)
		if err != nil {
			return fmt.Errorf("server CPU: %w", err)
		}
		if row.CPUByProcess == nil {
			row.CPUByProcess = map[string]time.Duration{}
		}
		for name, d := range byProcess {
			row.CPUByProcess[name] += d
		}
		row.CPU += total
		row.CPUKnown = true
		round.CPU = total
	}
	if readHash {
		after, err := t.HashCPU(ctx)
		if err != nil {
			return fmt.Errorf("password hash CPU: %w", err)
		}
		row.HashCPU += after - hashBefore
		row.HashKnown = true
		round.HashCPU = after - hashBefore
	}
	if t.CPU != nil && readHash {
		row.Rounds = append(row.Rounds, round)
	}
	return nil
}

// cpuDelta is the CPU each process used between two readings, and their
// sum. Both readings must name the same processes: a sum over a process
// that came or went would charge all its life, or none, to the scenario.
func cpuDelta(before, after map[string]time.Duration) (map[string]time.Duration, time.Duration, error) {
	if len(before) != len(after) {
		return nil, 0, fmt.Errorf("readings name %d then %d processes", len(before), len(after))
	}
	out := make(map[string]time.Duration, len(after))
	var total time.Duration
	for name, a := range after {
		b, ok := before[name]
		if !ok {
			return nil, 0, fmt.Errorf("process %s appeared during the scenario", name)
		}
		out[name] = a - b
		total += a - b
	}
	return out, total, nil
}

// notAvailable marks a scenario whose endpoint the server does not serve.
type notAvailable struct{ what string }

func (e *notAvailable) Error() string { return "not available: " + e.what }

func build(ctx context.Context, c *http.Client, t Target, f *Fixture, k Kind) (load.Op, error) {
	switch k {
	case TokenJWT:
		return tokenOp(c, t, f.JWTClient, true), nil
	case TokenOpaque:
		return tokenOp(c, t, f.OpaqueClient, false), nil
	case IntrospectJWT:
		return introspectOp(ctx, c, t, f, f.JWTClient, true)
	case IntrospectOpaque:
		return introspectOp(ctx, c, t, f, f.OpaqueClient, false)
	case Keys:
		return keysOp(c, t), nil
	case Login:
		return loginOp(ctx, c, t, f)
	case LoginTOTP:
		return loginTOTPOp(ctx, c, t, f)
	case DevicePoll:
		return devicePollOp(ctx, c, t, f)
	case PAR:
		return parOp(ctx, c, t, f)
	case TokenDPoP:
		return tokenDPoPOp(ctx, c, t, f.OpaqueClient)
	case IntrospectDPoP:
		return introspectDPoPOp(ctx, c, t, f)
	}
	return nil, fmt.Errorf("unknown scenario %q", k)
}

// keysOp is the GET of the key set.
func keysOp(c *http.Client, t Target) load.Op {
	u := t.Base + "/oauth/v2/keys"
	return load.RequestOp(c,
		func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		},
		func(body []byte) error {
			var ks struct {
				Keys []json.RawMessage `json:"keys"`
			}
			if err := json.Unmarshal(body, &ks); err != nil || len(ks.Keys) == 0 {
				return fmt.Errorf("not a non-empty key set: %.100s", body)
			}
			return nil
		})
}

// tokenOp is the client_credentials grant with client_secret_basic.
func tokenOp(c *http.Client, t Target, cr Credentials, wantJWT bool) load.Op {
	u := t.Base + "/oauth/v2/token"
	return load.RequestOp(c,
		formRequest(u, cr.basic(), "grant_type=client_credentials"),
		func(body []byte) error { return checkToken(body, wantJWT, t.Algorithm) })
}

// formRequest builds a POST of a form with an Authorization header.
func formRequest(u, authz, form string) load.Request {
	return func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", authz)
		return req, nil
	}
}

// checkToken accepts a token response whose access token has the
// expected form: a JWT signed with alg, or an opaque value.
func checkToken(body []byte, wantJWT bool, alg string) error {
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" || tok.TokenType != "Bearer" {
		return fmt.Errorf("not a Bearer token response: %.100s", body)
	}
	isJWT := strings.Count(tok.AccessToken, ".") == 2
	switch {
	case wantJWT && !isJWT:
		return errors.New("access token is not a JWT")
	case !wantJWT && isJWT:
		return errors.New("access token is a JWT; want opaque")
	case !wantJWT:
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok.AccessToken[:strings.IndexByte(tok.AccessToken, '.')])
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err != nil || json.Unmarshal(raw, &hdr) != nil {
		return errors.New("access token has a malformed JOSE header")
	}
	if hdr.Alg != alg {
		return fmt.Errorf("access token signed with %s; want %s", hdr.Alg, alg)
	}
	return nil
}

// introspectOp introspects one access token of client cr (a JWT or an
// opaque one, checked) whose audience holds the API app's project, with
// the app's client_secret_basic.
func introspectOp(ctx context.Context, c *http.Client, t Target, f *Fixture, cr Credentials, wantJWT bool) (load.Op, error) {
	var raw json.RawMessage
	if err := call(ctx, c, http.MethodPost, t.Base+"/oauth/v2/token", cr.basic(), "", url.Values{
		"grant_type": {"client_credentials"},
		"scope":      {"urn:gatehouse:iam:org:project:id:" + f.ProjectID + ":aud"},
	}, &raw); err != nil {
		return nil, fmt.Errorf("token to introspect: %w", err)
	}
	if err := checkToken(raw, wantJWT, t.Algorithm); err != nil {
		return nil, fmt.Errorf("token to introspect: %w", err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil {
		return nil, fmt.Errorf("token to introspect: %w", err)
	}
	req := formRequest(t.Base+"/oauth/v2/introspect", f.API.basic(), url.Values{"token": {tok.AccessToken}}.Encode())
	op := load.RequestOp(c, req, func(body []byte) error {
		var r struct {
			Active bool `json:"active"`
		}
		if err := json.Unmarshal(body, &r); err != nil || !r.Active {
			return fmt.Errorf("token not reported active: %.100s", body)
		}
		return nil
	})
	// Probe once: an endpoint that is not wired yet is reported, not failed.
	probe, err := req(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.Do(probe)
	if err != nil {
		return nil, fmt.Errorf("probe introspection: %w", err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return nil, &notAvailable{what: "POST /oauth/v2/introspect answered 404"}
	}
	return op, nil
}
