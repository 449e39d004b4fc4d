package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kinds of request of the load.
const (
	kindToken      = "token"        // client_credentials: edge → tokens (→ directory, cached)
	kindIntrospect = "introspect"   // edge → tokens (→ directory: the user's claims)
	kindRevoke     = "revoke"       // edge → tokens
	kindCreateUser = "create-user"  // management API: edge → directory
	kindMetadata   = "set-metadata" // management API: edge → directory
	kindAuthorize  = "authorize"    // the authorization endpoint: edge → authn (→ directory)
)

var faultKinds = []string{kindToken, kindIntrospect, kindRevoke, kindCreateUser, kindMetadata, kindAuthorize}

// faultResult is one request of the load and what came back.
type faultResult struct {
	kind       string
	start, end time.Time
	status     int    // 0: no HTTP answer
	problem    string // why it is not a success: the error, the body
	ok         bool   // the answer of normal operation
}

// faultToken is an access token of the load.
type faultToken struct {
	raw string
	m   *faultMachine
	// revoke is 0 before any revocation, 1 once one was sent but not
	// acknowledged (the token may or may not be revoked), 2 once one was
	// acknowledged.
	revoke    int
	revokedAt time.Time // when the revocation was acknowledged
}

// faultWrite is an acknowledged management write.
type faultWrite struct {
	userID string
	key    string // a metadata entry's key; empty: the user was created
	value  string
}

// faultLoad is faultWorkers+faultSideWorkers goroutines sending token,
// introspection, revocation, management and authorize requests through
// edge, recording every answer, every acknowledged write and every
// acknowledged revocation, and every answer that breaks the rules.
type faultLoad struct {
	c      *faultCluster
	client *http.Client
	// noAnswerOK: a request may get no HTTP answer at all (edge itself
	// is down); otherwise that is a violation.
	noAnswerOK atomic.Bool
	successes  atomic.Int64 // requests that got the answer of normal operation
	stop       chan struct{}
	wg         sync.WaitGroup
	started    time.Time

	mu         sync.Mutex
	results    []faultResult
	violations []string
	writes     []faultWrite
	tokens     []*faultToken
}

// startLoad starts the load and waits until every kind of request has
// succeeded.
func (c *faultCluster) startLoad() *faultLoad {
	c.t.Helper()
	l := &faultLoad{c: c, stop: make(chan struct{}), started: time.Now(), client: &http.Client{
		Timeout: 30 * time.Second, // longer than any fault: a hang is measured, not cut short
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConnsPerHost: faultWorkers + faultSideWorkers,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	for w := range faultWorkers {
		l.wg.Go(func() { l.tokenWork(w) })
	}
	for w := range faultSideWorkers {
		l.wg.Go(func() { l.sideWork(w) })
		l.wg.Go(l.authorizeWork)
	}
	c.t.Cleanup(l.halt)
	l.awaitRecovery("load warm-up", l.started)
	return l
}

// halt stops the load and waits for the workers.
func (l *faultLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *faultLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// tokenWork is a token worker: rounds of a new token for its machine
// user, an introspection of one of its live tokens, the revocation of its
// oldest live token and an introspection of it, and an introspection of
// a token revoked earlier, until the load stops.
func (l *faultLoad) tokenWork(w int) {
	m := l.c.machines[w]
	var live, revoked []*faultToken
	for round := 0; !l.stopped(); round++ {
		before := l.successes.Load()
		if tok := l.token(m); tok != nil {
			live = append(live, tok)
		}
		if len(live) > 0 {
			l.introspect(live[round%len(live)])
		}
		if len(live) > 2 { // keep a few live tokens to check they stay active
			tok := live[0]
			live = live[1:]
			if l.revokeToken(tok) {
				revoked = append(revoked, tok)
				l.introspect(tok)
			}
		}
		if len(revoked) > 0 {
			l.introspect(revoked[round%len(revoked)])
		}
		l.pause(before)
	}
}

// sideWork is a management worker: rounds of a user creation or a
// metadata entry (set on a token worker's machine user), until the load
// stops.
func (l *faultLoad) sideWork(w int) {
	for round := 0; !l.stopped(); round++ {
		before := l.successes.Load()
		if round%2 == 0 {
			l.createUser(fmt.Sprintf("fault-%d-%d", w, round))
		} else {
			l.setMetadata(l.c.machines[w%faultWorkers].userID, fmt.Sprintf("k-%d-%d", w, round),
				fmt.Sprintf("v-%d-%d-%d", w, round, time.Now().UnixNano()))
		}
		l.pause(before)
	}
}

// authorizeWork is a browser worker: rounds of an authorization request,
// apart from the management workers, so a hung authn does not hold the
// management load back (nor the other way round).
func (l *faultLoad) authorizeWork() {
	for !l.stopped() {
		before := l.successes.Load()
		l.authorize()
		l.pause(before)
	}
}

// pause ends a worker's round: faultPause, or faultBackoff when no
// request of any worker succeeded since before.
func (l *faultLoad) pause(before int64) {
	d := faultPause
	if l.successes.Load() == before {
		d = faultBackoff
	}
	select {
	case <-l.stop:
	case <-time.After(d):
	}
}

// send sends req through edge and records the answer: 200 (want, for
// authorize 302) is a success, 503 with Retry-After the documented
// failure, no answer a violation unless noAnswerOK, anything else a
// violation. check, when the status is want, may find the answer wrong
// (a violation).
func (l *faultLoad) send(kind string, req *http.Request, want int, check func(body []byte) string) (int, []byte) {
	r := faultResult{kind: kind, start: time.Now()}
	res, err := l.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(res.Body)
		res.Body.Close()
		r.status = res.StatusCode
	}
	r.end = time.Now()
	violation := ""
	switch {
	case err != nil && r.status == 0:
		r.problem = err.Error()
		if !l.noAnswerOK.Load() {
			violation = "no answer: " + err.Error()
		}
	case err != nil:
		r.problem = "reading the body: " + err.Error()
		violation = r.problem
	case r.status == want:
		if check != nil {
			violation = check(body)
		}
		r.ok, r.problem = violation == "", violation
	case r.status == http.StatusServiceUnavailable:
		r.problem = string(body)
		if res.Header.Get("Retry-After") == "" || !strings.Contains(strings.ToLower(string(body)), "unavailable") {
			violation = fmt.Sprintf("503 (Retry-After %q) %s; want Retry-After and temporarily_unavailable or UNAVAILABLE",
				res.Header.Get("Retry-After"), body)
		}
	default:
		r.problem = string(body)
		violation = fmt.Sprintf("%d %s", r.status, body)
	}
	if r.ok {
		l.successes.Add(1)
	}
	l.mu.Lock()
	l.results = append(l.results, r)
	if violation != "" {
		l.violations = append(l.violations, fmt.Sprintf("%s %s at +%v: %s", kind, req.URL.Path,
			r.start.Sub(l.started).Round(time.Millisecond), truncate(violation, 300)))
	}
	l.mu.Unlock()
	if !r.ok {
		return r.status, nil
	}
	return r.status, body
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (l *faultLoad) form(path, auth string, form url.Values) *http.Request {
	req, _ := http.NewRequest("POST", l.c.edge.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", auth)
	return req
}

func (l *faultLoad) management(method, path string, body any) *http.Request {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, l.c.edge.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+l.c.admin)
	return req
}

// token gets an access token for m by client_credentials; nil unless 200.
func (l *faultLoad) token(m *faultMachine) *faultToken {
	var raw string
	l.send(kindToken, l.form("/oauth/v2/token", basicAuth(m.clientID, m.secret), url.Values{
		"grant_type": {"client_credentials"}, "scope": {"openid " + l.c.audience},
	}), http.StatusOK, func(body []byte) string {
		var tok struct {
			AccessToken string `json:"access_token"`
			TokenType   string `json:"token_type"`
		}
		if json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" || tok.TokenType != "Bearer" {
			return "200 without a bearer token: " + string(body)
		}
		if isJWT := strings.Count(tok.AccessToken, ".") == 2; isJWT != m.jwt {
			return "access token of the wrong format: " + tok.AccessToken
		}
		raw = tok.AccessToken
		return ""
	})
	if raw == "" {
		return nil
	}
	tok := &faultToken{raw: raw, m: m}
	l.mu.Lock()
	l.tokens = append(l.tokens, tok)
	l.mu.Unlock()
	return tok
}

// introspect asks about tok as the API app: active unless a revocation
// was acknowledged, inactive once one was; either while one is unsure.
func (l *faultLoad) introspect(tok *faultToken) {
	l.mu.Lock()
	state := tok.revoke
	l.mu.Unlock()
	l.send(kindIntrospect, l.form("/oauth/v2/introspect", l.c.apiBasic, url.Values{"token": {tok.raw}}),
		http.StatusOK, func(body []byte) string { return introspectionProblem(body, tok.m, state) })
}

// introspectionProblem is what is wrong with an introspection answer for
// a token of m in revocation state (faultToken.revoke); empty if nothing.
func introspectionProblem(body []byte, m *faultMachine, state int) string {
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		return "introspection answer is not JSON: " + string(body)
	}
	switch {
	case state == 2 && in["active"] != false:
		return "REVOKED token (revocation acknowledged) introspects as " + string(body)
	case state == 0 && (in["active"] != true || in["sub"] != m.userID):
		return "valid token (never revoked) introspects as " + string(body)
	}
	return ""
}

// revokeToken revokes tok as its client and reports whether that was
// acknowledged.
func (l *faultLoad) revokeToken(tok *faultToken) bool {
	l.mu.Lock()
	tok.revoke = 1
	l.mu.Unlock()
	status, _ := l.send(kindRevoke, l.form("/oauth/v2/revoke", basicAuth(tok.m.clientID, tok.m.secret),
		url.Values{"token": {tok.raw}}), http.StatusOK, nil)
	if status != http.StatusOK {
		return false
	}
	l.mu.Lock()
	tok.revoke, tok.revokedAt = 2, time.Now()
	l.mu.Unlock()
	return true
}

// createUser creates a machine user named name and records it if
// acknowledged.
func (l *faultLoad) createUser(name string) {
	var id string
	l.send(kindCreateUser, l.management("POST", "/management/v1/users/machine", map[string]any{"userName": name, "name": name}),
		http.StatusOK, func(body []byte) string {
			var res struct {
				UserID string `json:"userId"`
			}
			if json.Unmarshal(body, &res) != nil || res.UserID == "" {
				return "200 without a user id: " + string(body)
			}
			id = res.UserID
			return ""
		})
	if id != "" {
		l.mu.Lock()
		l.writes = append(l.writes, faultWrite{userID: id, value: name})
		l.mu.Unlock()
	}
}

// setMetadata sets the metadata entry key of user userID to value and
// records it if acknowledged.
func (l *faultLoad) setMetadata(userID, key, value string) {
	status, _ := l.send(kindMetadata, l.management("POST", "/management/v1/users/"+userID+"/metadata/"+key,
		map[string]any{"value": base64.StdEncoding.EncodeToString([]byte(value))}), http.StatusOK, nil)
	if status == http.StatusOK {
		l.mu.Lock()
		l.writes = append(l.writes, faultWrite{userID: userID, key: key, value: value})
		l.mu.Unlock()
	}
}

// authorize starts a code flow of the CLI's native app: the login page.
func (l *faultLoad) authorize() {
	q := url.Values{"client_id": {"gatehouse-cli"}, "redirect_uri": {"http://127.0.0.1:1/callback"}, "response_type": {"code"},
		"scope": {"openid"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}, "state": {"fault"}}
	req, _ := http.NewRequest("GET", l.c.edge.base+"/oauth/v2/authorize?"+q.Encode(), nil)
	l.send(kindAuthorize, req, http.StatusFound, func([]byte) string { return "" })
}

// recoveredAt reports when, after from, every kind of request succeeded
// again: the later of the end of the last failure and, for each kind,
// the first success sent after that failure. ok is false while some kind
// has not succeeded since.
func (l *faultLoad) recoveredAt(from time.Time) (at time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lastBad := from
	for _, r := range l.results {
		if !r.ok && r.end.After(lastBad) {
			lastBad = r.end
		}
	}
	at = lastBad
	for _, kind := range faultKinds {
		var first time.Time
		for _, r := range l.results {
			if r.kind == kind && r.ok && !r.start.Before(lastBad) && (first.IsZero() || r.end.Before(first)) {
				first = r.end
			}
		}
		if first.IsZero() {
			return time.Time{}, false
		}
		if first.After(at) {
			at = first
		}
	}
	return at, true
}

// awaitRecovery waits, with the load running, until every kind of request
// has succeeded after from and nothing has failed for faultSettle. It
// logs and returns the recovery time and fails the test beyond
// faultRecoveryLimit.
func (l *faultLoad) awaitRecovery(phase string, from time.Time) time.Duration {
	t := l.c.t
	t.Helper()
	deadline := from.Add(faultRecoveryLimit + faultSettle)
	for {
		at, ok := l.recoveredAt(from)
		if ok && time.Since(at) >= faultSettle {
			d := at.Sub(from)
			t.Logf("%s: %v (until every kind of request succeeds, then nothing fails for %v)", phase, d.Round(time.Millisecond), faultSettle)
			if d > faultRecoveryLimit {
				t.Errorf("%s: recovery took %v; want less than %v", phase, d.Round(time.Millisecond), faultRecoveryLimit)
			}
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not recovered %v after the fault ended; since then:\n%s", phase, faultRecoveryLimit+faultSettle, l.summary(from, time.Now()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// summary counts the answers of each kind between from and to (by
// start), with the slowest.
func (l *faultLoad) summary(from, to time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, kind := range faultKinds {
		counts := map[string]int{}
		var slowest time.Duration
		for _, r := range l.results {
			if r.kind != kind || r.start.Before(from) || r.start.After(to) {
				continue
			}
			key := strconv.Itoa(r.status)
			if r.status == 0 {
				key = "no answer"
			} else if !r.ok && r.status != http.StatusServiceUnavailable {
				key += " (wrong)"
			}
			counts[key]++
			slowest = max(slowest, r.end.Sub(r.start))
		}
		keys := slices.Sorted(maps.Keys(counts))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s×%d", k, counts[k])
		}
		fmt.Fprintf(&b, "  %-12s %-40s slowest %v\n", kind, strings.Join(parts, " "), slowest.Round(time.Millisecond))
	}
	return b.String()
}

// statuses lists the statuses of the answers between from and to,
// each once, sorted ("no answer" for 0).
func (l *faultLoad) statuses(from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range l.results {
		if r.start.Before(from) || r.start.After(to) {
			continue
		}
		if r.status == 0 {
			seen["no answer"] = true
		} else {
			seen[strconv.Itoa(r.status)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// slowest is the longest request that was in flight between from and to.
func (l *faultLoad) slowest(from, to time.Time, kinds ...string) (time.Duration, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d time.Duration
	var kind string
	for _, r := range l.results {
		if r.end.Before(from) || r.start.After(to) || len(kinds) > 0 && !slices.Contains(kinds, r.kind) {
			continue
		}
		if took := r.end.Sub(r.start); took > d {
			d, kind = took, fmt.Sprintf("%s (%d)", r.kind, r.status)
		}
	}
	return d, kind
}

// finish stops the load, reports every violation, logs what clients saw
// during the fault (from faultStart to faultEnd, by start) and after, and
// checks every acknowledged write and revocation through edge.
func (l *faultLoad) finish(faultStart, faultEnd time.Time) {
	t := l.c.t
	t.Helper()
	l.halt()
	t.Logf("answers before the fault:\n%s", l.summary(l.started, faultStart))
	t.Logf("answers during the fault:\n%s", l.summary(faultStart, faultEnd))
	t.Logf("answers after the fault:\n%s", l.summary(faultEnd, time.Now()))
	l.mu.Lock()
	violations := l.violations
	l.mu.Unlock()
	for i, v := range violations {
		if i == 20 {
			t.Errorf("… and %d more violations", len(violations)-i)
			break
		}
		t.Errorf("violation: %s", v)
	}
	l.verify()
}

// verify checks, through edge with the load stopped, that every
// acknowledged write is there, every token whose revocation was
// acknowledged is inactive and every token never revoked is active.
func (l *faultLoad) verify() {
	t := l.c.t
	t.Helper()
	type check struct {
		name string
		req  func() *http.Request
		ok   func(status int, body []byte) bool
	}
	var checks []check
	users, entries, revoked, live := 0, 0, 0, 0
	l.mu.Lock()
	for _, w := range l.writes {
		if w.key == "" {
			users++
			checks = append(checks, check{"created user " + w.value + " (" + w.userID + ")",
				func() *http.Request { return l.management("GET", "/management/v1/users/"+w.userID, nil) },
				func(status int, body []byte) bool { return status == 200 && strings.Contains(string(body), w.value) }})
			continue
		}
		entries++
		checks = append(checks, check{"metadata " + w.key + "=" + w.value + " of " + w.userID,
			func() *http.Request {
				return l.management("GET", "/management/v1/users/"+w.userID+"/metadata/"+w.key, nil)
			},
			func(status int, body []byte) bool {
				var res struct {
					Metadata struct {
						Value []byte `json:"value"`
					} `json:"metadata"`
				}
				return status == 200 && json.Unmarshal(body, &res) == nil && string(res.Metadata.Value) == w.value
			}})
	}
	for _, tok := range l.tokens {
		if tok.revoke == 1 {
			continue
		}
		if tok.revoke == 2 {
			revoked++
		} else {
			live++
		}
		checks = append(checks, check{fmt.Sprintf("token of %s (revocation state %d)", tok.m.clientID, tok.revoke),
			func() *http.Request {
				return l.form("/oauth/v2/introspect", l.c.apiBasic, url.Values{"token": {tok.raw}})
			},
			func(status int, body []byte) bool {
				return status == 200 && introspectionProblem(body, tok.m, tok.revoke) == ""
			}})
	}
	l.mu.Unlock()
	if users == 0 || entries == 0 || revoked == 0 || live == 0 {
		t.Errorf("the load acknowledged %d user creations, %d metadata entries, %d revocations and kept %d live tokens; want some of each",
			users, entries, revoked, live)
	}

	var mu sync.Mutex
	var failures []string
	next := make(chan check)
	var wg sync.WaitGroup
	for range faultWorkers + faultSideWorkers {
		wg.Go(func() {
			for c := range next {
				res, err := l.client.Do(c.req())
				if err != nil {
					mu.Lock()
					failures = append(failures, c.name+": "+err.Error())
					mu.Unlock()
					continue
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if !c.ok(res.StatusCode, body) {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %d %s", c.name, res.StatusCode, truncate(string(body), 300)))
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range checks {
		next <- c
	}
	close(next)
	wg.Wait()
	sort.Strings(failures)
	for i, f := range failures {
		if i == 20 {
			t.Errorf("… and %d more", len(failures)-i)
			break
		}
		t.Errorf("after the fault: %s", f)
	}
	t.Logf("verified after the fault: %d created users, %d metadata entries, %d acknowledged revocations (inactive), %d never revoked tokens (active); %d wrong",
		users, entries, revoked, live, len(failures))
}

// requireStatuses fails the test unless the statuses clients saw between
// from and to are among allowed.
func (l *faultLoad) requireStatuses(phase string, from, to time.Time, allowed ...string) {
	t := l.c.t
	t.Helper()
	got := l.statuses(from, to)
	for _, s := range got {
		if !slices.Contains(allowed, s) {
			t.Errorf("%s: clients saw %v; want only %v", phase, got, allowed)
			return
		}
	}
	t.Logf("%s: clients saw %v", phase, got)
}

// requireServed fails the test unless every request of kinds sent
// between from and to got the answer of normal operation, and each kind
// was sent: the fault stayed confined to the routes that need what
// failed.
func (l *faultLoad) requireServed(phase string, from, to time.Time, kinds ...string) {
	t := l.c.t
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	served := true
	for _, kind := range kinds {
		sent, failed := 0, 0
		var example string
		for _, r := range l.results {
			if r.kind != kind || r.start.Before(from) || r.start.After(to) {
				continue
			}
			sent++
			if !r.ok {
				failed++
				example = fmt.Sprintf("%d %s", r.status, truncate(r.problem, 200))
			}
		}
		switch {
		case sent == 0:
			served = false
			t.Errorf("%s: no %s request was sent; want some served", phase, kind)
		case failed > 0:
			served = false
			t.Errorf("%s: %d of %d %s requests failed (e.g. %s); want every one served", phase, failed, sent, kind, example)
		}
	}
	if served {
		t.Logf("%s: every %v request served", phase, kinds)
	}
}

// revokedBetween lists the tokens whose revocation was acknowledged
// between from and to.
func (l *faultLoad) revokedBetween(from, to time.Time) []*faultToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*faultToken
	for _, tok := range l.tokens {
		if tok.revoke == 2 && !tok.revokedAt.Before(from) && !tok.revokedAt.After(to) {
			out = append(out, tok)
		}
	}
	return out
}

// introspectNow introspects tok through edge outside the load's records.
func (l *faultLoad) introspectNow(tok *faultToken) (int, []byte) {
	res, err := l.client.Do(l.form("/oauth/v2/introspect", l.c.apiBasic, url.Values{"token": {tok.raw}}))
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, body
}
