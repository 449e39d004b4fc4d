package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Redis keys of the tokens service's revocation list (revocation.DefaultPrefix;
// the layout is described in services/tokens/internal/revocation/doc.go).
const (
	rvEntryPrefix = "gatehouse:tokens:revoked:"
	rvMarker      = "gatehouse:tokens:revocations:loaded"
	rvLock        = "gatehouse:tokens:revocations:loading"
)

// redisServer is a redis-server child process of the test, on a loopback
// port of its own, so the test can flush, stop and restart it without
// touching the machine's shared Redis.
type redisServer struct {
	t    *testing.T
	bin  string
	addr string
	args []string
	out  *syncBuffer
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a private redis-server that snapshots only on SAVE and
// keeps no append-only file, so a restart after SIGTERM comes back empty.
// Without the binary the test is skipped, or fails under CI=true.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server is required under CI=true (this test stops and restarts its own Redis): %v", err)
		}
		t.Skipf("skipping: redis-server not found in PATH (%v); install Redis or run under CI=true to make this a failure", err)
	}
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	r := &redisServer{t: t, bin: bin, addr: addr, out: &syncBuffer{},
		args: []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}}
	r.start()
	t.Cleanup(func() {
		if r.running() {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// url is the Redis URL of database db on this server.
func (r *redisServer) url(db int) string {
	return "redis://" + r.addr + "/" + strconv.Itoa(db)
}

func (r *redisServer) running() bool {
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// start runs redis-server on r.addr and waits until it answers PING.
func (r *redisServer) start() {
	r.t.Helper()
	if r.running() {
		r.t.Fatal("redis-server already running")
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", r.addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			break
		}
		if !r.running() || time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not come up: %v\n%s", r.addr, err, r.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := r.client(0)
	defer c.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err() // LOADING while a snapshot is read
		cancel()
		if err == nil {
			return
		}
		if !r.running() || time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s does not answer PING: %v\n%s", r.addr, err, r.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends redis-server with sig (SIGTERM: clean shutdown; SIGKILL: a
// crash) and waits until it has exited and its port refuses connections.
func (r *redisServer) stop(sig syscall.Signal) {
	r.t.Helper()
	if !r.running() {
		r.t.Fatal("redis-server is not running")
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal redis-server: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		r.t.Fatalf("redis-server ignored %v for 10s:\n%s", sig, r.out)
	}
	c := r.client(0)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err == nil {
		r.t.Fatalf("something still answers PING on %s after redis-server exited", r.addr)
	}
}

// client is a go-redis client for database db, with short timeouts and no
// retries so a stopped server is an error at once.
func (r *redisServer) client(db int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: r.addr, DB: db, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1, DialerRetries: 1})
}

// rvEnv is a distributed deployment (directory, tokens, authn, edge on
// PostgreSQL and a private Redis) with an API app to introspect with.
type rvEnv struct {
	t         *testing.T
	edge      *proc
	tokens    *proc
	issuer    string
	admin     string // management access token
	projectID string
	apiID     string
	apiSecret string
	redis     *redisServer
	rdb       *redis.Client // the database the tokens service uses
	d         *distributed
}

// rvStart starts the deployment of TestDistributedManagement with every
// process on database redisDB of r.
func rvStart(t *testing.T, r *redisServer, redisDB int) *rvEnv {
	t.Helper()
	// Edge's rate limiter shares the Redis, as in make run-distributed; it
	// fails open while Redis is down.
	d := startDistributed(t, r.url(redisDB))
	issuer, tokens, edge := d.issuer, d.tokens, d.edge
	_, tok := operatorToken(t, edge.base, d.directoryData, issuer)
	admin := tok["access_token"].(string)
	status, proj := restJSON(t, "POST", edge.base+"/management/v1/projects", admin, map[string]any{"name": "Revocation API"})
	projectID, _ := proj["id"].(string)
	if status != 200 || projectID == "" {
		t.Fatalf("AddProject: %d %v", status, proj)
	}
	status, app := restJSON(t, "POST", edge.base+"/management/v1/projects/"+projectID+"/apps/api", admin,
		map[string]any{"name": "revocation-api", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"})
	apiID, _ := app["clientId"].(string)
	apiSecret, _ := app["clientSecret"].(string)
	if status != 200 || apiID == "" || apiSecret == "" {
		t.Fatalf("AddAPIApp: %d %v", status, app)
	}
	e := &rvEnv{t: t, d: d, edge: edge, tokens: tokens, issuer: issuer, admin: admin, projectID: projectID,
		apiID: apiID, apiSecret: apiSecret, redis: r, rdb: r.client(redisDB)}
	t.Cleanup(func() { _ = e.rdb.Close() })
	return e
}

// rvMachine is a machine user with a client secret.
type rvMachine struct {
	tokenType string // ACCESS_TOKEN_TYPE_JWT or ACCESS_TOKEN_TYPE_BEARER
	userID    string
	clientID  string
	secret    string
}

// machine creates a machine user issuing tokenType access tokens.
func (e *rvEnv) machine(name, tokenType string) *rvMachine {
	t := e.t
	t.Helper()
	status, mu := restJSON(t, "POST", e.edge.base+"/management/v1/users/machine", e.admin,
		map[string]any{"userName": name, "name": name, "accessTokenType": tokenType})
	uid, _ := mu["userId"].(string)
	if status != 200 || uid == "" {
		t.Fatalf("AddMachineUser %s: %d %v", name, status, mu)
	}
	status, sec := restJSON(t, "PUT", e.edge.base+"/management/v1/users/"+uid+"/secret", e.admin, map[string]any{})
	id, _ := sec["clientId"].(string)
	secret, _ := sec["clientSecret"].(string)
	if status != 200 || id == "" || secret == "" {
		t.Fatalf("GenerateMachineSecret %s: %d %v", name, status, sec)
	}
	return &rvMachine{tokenType: tokenType, userID: uid, clientID: id, secret: secret}
}

// rvToken is an access token under test and whether it should be revoked.
type rvToken struct {
	name    string
	m       *rvMachine
	raw     string
	id      string // jti as introspection reports it: the revocation list's key
	revoked bool
}

// token gets an access token for m by client_credentials through edge,
// with the project's audience, and checks it introspects as active.
func (e *rvEnv) token(name string, m *rvMachine) *rvToken {
	t := e.t
	t.Helper()
	cc := clientcredentials.Config{ClientID: m.clientID, ClientSecret: m.secret, TokenURL: e.edge.base + "/oauth/v2/token",
		Scopes: []string{"openid", "urn:gatehouse:iam:org:project:id:" + e.projectID + ":aud"}, AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatalf("client_credentials for %s: %v", name, err)
	}
	if isJWT := strings.Count(tok.AccessToken, ".") == 2; isJWT != (m.tokenType == "ACCESS_TOKEN_TYPE_JWT") {
		t.Fatalf("%s: %s machine user got access token %q", name, m.tokenType, tok.AccessToken)
	}
	status, in := e.introspect(tok.AccessToken)
	id, _ := in["jti"].(string)
	if status != 200 || in["active"] != true || in["sub"] != m.userID || id == "" {
		t.Fatalf("%s: fresh token introspects as %d %v; want active with sub %s and a jti", name, status, in, m.userID)
	}
	return &rvToken{name: name, m: m, raw: tok.AccessToken, id: id}
}

// introspect asks POST /oauth/v2/introspect through edge as the API app.
func (e *rvEnv) introspect(token string) (int, map[string]any) {
	t := e.t
	t.Helper()
	req, _ := http.NewRequest("POST", e.edge.base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(e.apiID), url.QueryEscape(e.apiSecret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("introspect: %v", err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// userinfo asks GET /oidc/v1/userinfo through edge with the token.
func (e *rvEnv) userinfo(token string) (int, string, map[string]any) {
	t := e.t
	t.Helper()
	res, body := do(t, "GET", e.edge.base+"/oidc/v1/userinfo", nil, map[string]string{"Authorization": "Bearer " + token})
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), m
}

// revoke revokes tok through edge as the client it was issued to.
func (e *rvEnv) revoke(phase string, tok *rvToken) {
	t := e.t
	t.Helper()
	req, _ := http.NewRequest("POST", e.edge.base+"/oauth/v2/revoke", strings.NewReader(url.Values{"token": {tok.raw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(tok.m.clientID), url.QueryEscape(tok.m.secret))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: revoke %s: %v", phase, tok.name, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("%s: revoke %s = %d %s; want 200", phase, tok.name, res.StatusCode, b.String())
	}
	tok.revoked = true
}

// check asserts, through edge, that every revoked token is inactive on
// introspection and refused by userinfo (401 invalid_token), and every
// other token is active on both.
func (e *rvEnv) check(phase string, toks []*rvToken) {
	e.t.Helper()
	if errs := e.problems(phase, toks); len(errs) > 0 {
		e.t.Fatal(strings.Join(errs, "\n"))
	}
}

// problems is check's findings, one line each.
func (e *rvEnv) problems(phase string, toks []*rvToken) []string {
	e.t.Helper()
	var errs []string
	errorf := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	// Revoked tokens first: right after a flush or a restart, the first
	// lookup is the one that finds the list unloaded (it also starts the
	// rebuild, which the next lookups may already see finished).
	ordered := slices.Clone(toks)
	slices.SortStableFunc(ordered, func(a, b *rvToken) int {
		switch {
		case a.revoked == b.revoked:
			return 0
		case a.revoked:
			return -1
		}
		return 1
	})
	for _, tok := range ordered {
		status, in := e.introspect(tok.raw)
		switch {
		case status != 200:
			errorf("%s: introspecting %s = %d %v; want 200", phase, tok.name, status, in)
		case tok.revoked && (in["active"] != false || len(in) != 1):
			errorf("%s: REVOKED token %s (jti %s) introspects as %v; want exactly {active:false}", phase, tok.name, tok.id, in)
		case !tok.revoked && (in["active"] != true || in["sub"] != tok.m.userID || in["jti"] != tok.id):
			errorf("%s: unrevoked token %s (jti %s) introspects as %v; want active with sub %s", phase, tok.name, tok.id, in, tok.m.userID)
		}
		status, challenge, ui := e.userinfo(tok.raw)
		switch {
		case tok.revoked && (status != 401 || !strings.Contains(challenge, `error="invalid_token"`)):
			errorf("%s: userinfo with REVOKED token %s (jti %s) = %d %v (WWW-Authenticate %q); want 401 invalid_token",
				phase, tok.name, tok.id, status, ui, challenge)
		case !tok.revoked && (status != 200 || ui["sub"] != tok.m.userID):
			errorf("%s: userinfo with unrevoked token %s = %d %v (WWW-Authenticate %q); want 200 with sub %s",
				phase, tok.name, status, ui, challenge, tok.m.userID)
		}
	}
	return errs
}

// exists reports which of keys exist in the tokens service's Redis database.
func (e *rvEnv) exists(keys ...string) map[string]bool {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pipe := e.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("EXISTS in Redis: %v", err)
	}
	out := make(map[string]bool, len(keys))
	for i, k := range keys {
		out[k] = cmds[i].Val() == 1
	}
	return out
}

// redisMatches reports whether Redis holds the loaded marker and exactly
// the revoked tokens' entries (no entry for an unrevoked token).
func (e *rvEnv) redisMatches(toks []*rvToken) (bool, string) {
	keys := []string{rvMarker}
	for _, tok := range toks {
		keys = append(keys, rvEntryPrefix+tok.id)
	}
	have := e.exists(keys...)
	var bad []string
	if !have[rvMarker] {
		bad = append(bad, "no loaded marker")
	}
	for _, tok := range toks {
		if have[rvEntryPrefix+tok.id] != tok.revoked {
			bad = append(bad, tok.name+" entry present="+map[bool]string{true: "yes", false: "no"}[have[rvEntryPrefix+tok.id]])
		}
	}
	return len(bad) == 0, strings.Join(bad, ", ")
}

// waitRedisList polls until the tokens service has (re)built its Redis
// list: the marker and exactly the revoked tokens' entries.
func (e *rvEnv) waitRedisList(phase string, toks []*rvToken) {
	t := e.t
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, why := e.redisMatches(toks)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the tokens service did not rebuild its Redis revocation list within 10s: %s\ntokens log:\n%s",
				phase, why, e.tokens.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flushAll empties every Redis database and checks, before anything else
// talks to Redis, that the tokens service's database is empty. The tokens
// service's background sync (every 2s) rebuilds the list as soon as it sees
// the marker gone; should it slip in between the flush and the check, the
// flush is repeated.
func (e *rvEnv) flushAll(phase string) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	admin := e.redis.client(0)
	defer admin.Close()
	for range 5 {
		if err := admin.FlushAll(ctx).Err(); err != nil {
			t.Fatalf("%s: FLUSHALL: %v", phase, err)
		}
		n, err := e.rdb.DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("%s: DBSIZE: %v", phase, err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatalf("%s: the tokens service's Redis database never stayed empty after FLUSHALL", phase)
}

// TestRevocationDistributedRedis: in the distributed deployment, token
// revocation is seen by introspection and userinfo through edge with Redis
// up, after Redis is flushed (FLUSHALL, then FLUSHDB while the rebuild is
// held off), while Redis is stopped (checks and new revocations fall back
// to PostgreSQL) and after it is restarted empty. Unrevoked control tokens
// must stay active in every phase, so the test fails in both directions.
func TestRevocationDistributedRedis(t *testing.T) {
	start := time.Now()
	const redisDB = 3 // not 0: FLUSHDB must hit the database tokens uses
	r := startRedis(t)
	e := rvStart(t, r, redisDB)
	jwtUser := e.machine("svc-jwt", "ACCESS_TOKEN_TYPE_JWT")
	opaqueUser := e.machine("svc-opaque", "ACCESS_TOKEN_TYPE_BEARER")

	var toks []*rvToken
	type pair struct{ jwt, opaque *rvToken }
	newPair := func(name string) pair {
		p := pair{e.token(name+"-jwt", jwtUser), e.token(name+"-opaque", opaqueUser)}
		toks = append(toks, p.jwt, p.opaque)
		return p
	}
	newPair("control")                 // never revoked
	upRevoked := newPair("revoked-up") // revoked with Redis up
	flushRevoked := newPair("revoked-unloaded")
	downRevoked := newPair("revoked-down")
	afterRevoked := newPair("revoked-after-restart")
	t.Logf("deployment and %d tokens ready after %v", len(toks), time.Since(start).Round(time.Millisecond))

	// Phase 1: Redis up. The first checks make the tokens service load
	// its (empty) list; a revocation is in Redis when the revocation
	// request returns, and seen at once.
	phase := "redis up"
	e.check(phase, toks)
	e.waitRedisList(phase, toks)
	e.revoke(phase, upRevoked.jwt)
	e.revoke(phase, upRevoked.opaque)
	if ok, why := e.redisMatches(toks); !ok {
		t.Fatalf("%s: Redis list right after revoking: %s; want the marker and exactly the revoked entries", phase, why)
	}
	e.check(phase, toks)

	// Phase 2a: FLUSHALL. The marker is gone with the entries, so a miss
	// must not be trusted until the list is rebuilt from PostgreSQL.
	phase = "after FLUSHALL"
	e.flushAll(phase)
	e.check(phase, toks)
	e.waitRedisList(phase, toks)
	e.check(phase+", list rebuilt", toks)

	// Phase 2b: FLUSHDB of the tokens database, holding the rebuild lock
	// (as another replica rebuilding would) so the list stays unloaded
	// for as long as the checks run. The flush and the lock are one
	// transaction: no rebuild can slip in between.
	phase = "after FLUSHDB, list not rebuilt"
	ctx := context.Background()
	if _, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.FlushDB(ctx)
		p.Set(ctx, rvLock, "held-by-e2e", 30*time.Second)
		return nil
	}); err != nil {
		t.Fatalf("%s: FLUSHDB + lock: %v", phase, err)
	}
	if keys, err := e.rdb.Keys(ctx, "*").Result(); err != nil || len(keys) != 1 || keys[0] != rvLock {
		t.Fatalf("%s: Redis database %d holds %v (%v); want only the rebuild lock", phase, redisDB, keys, err)
	}
	e.check(phase, toks)
	// A revocation while the list is unloaded is pushed without a marker.
	e.revoke(phase, flushRevoked.jwt)
	e.revoke(phase, flushRevoked.opaque)
	e.check(phase, toks)
	// Pushed at once, or, while tokens backs off from an earlier Redis
	// error, by its next sync of the pending rows (durable first).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		have := e.exists(rvMarker, rvEntryPrefix+flushRevoked.jwt.id, rvEntryPrefix+flushRevoked.opaque.id)
		if have[rvMarker] {
			t.Fatalf("%s: Redis holds the loaded marker while the rebuild lock is held", phase)
		}
		if have[rvEntryPrefix+flushRevoked.jwt.id] && have[rvEntryPrefix+flushRevoked.opaque.id] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Redis holds %v after 10 s; want the new revocations pushed", phase, have)
		}
	}
	if err := e.rdb.Del(ctx, rvLock).Err(); err != nil {
		t.Fatalf("%s: release lock: %v", phase, err)
	}
	e.waitRedisList("after FLUSHDB, lock released", toks)
	e.check("after FLUSHDB, list rebuilt", toks)

	// Phase 3: Redis stopped. Checks fall back to PostgreSQL; a
	// revocation is durable there and seen at once. The checks run for
	// longer than the service's 1s Redis backoff, so both the skip and
	// the retry-and-fail paths answer. Rounds are paced: edge's limiter
	// falls back to its in-process budgets, which back-to-back rounds on
	// a fast machine exceed (the api app's introspections, and the
	// address cap).
	phase = "redis stopped"
	r.stop(syscall.SIGTERM)
	down := time.Now()
	e.check(phase, toks)
	e.revoke(phase, downRevoked.jwt)
	e.revoke(phase, downRevoked.opaque)
	rounds := 0
	for time.Since(down) < 2500*time.Millisecond || rounds < 2 {
		e.check(phase, toks)
		rounds++
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("redis stopped: %d check rounds over %v", rounds, time.Since(down).Round(time.Millisecond))

	// Phase 4: Redis back, empty (no persistence). Checks hold at once;
	// the list is rebuilt with the revocations made while it was down,
	// and a new revocation is pushed to it.
	phase = "redis restarted"
	r.start()
	e.check(phase, toks)
	e.waitRedisList(phase, toks)
	e.check(phase+", list rebuilt", toks)
	e.revoke(phase, afterRevoked.jwt)
	e.revoke(phase, afterRevoked.opaque)
	e.check(phase+", new revocation", toks)
	if ok, why := e.redisMatches(toks); !ok {
		t.Fatalf("%s: Redis list after a new revocation: %s", phase, why)
	}
	if !strings.Contains(e.tokens.log.String(), "revocation: Redis list rebuilt from the database") {
		t.Errorf("tokens log never reports a rebuild of the Redis list:\n%s", e.tokens.log)
	}
	t.Logf("all phases passed in %v", time.Since(start).Round(time.Millisecond))
}

// TestRevocationRedisRestoredFromSnapshot: Redis persists snapshots (as
// redis-server does by default, and as AOF/RDB-backed managed Redis does),
// crashes after a revocation was pushed, and restarts from a snapshot taken
// before it. The snapshot brings back the loaded marker without the
// revocation's entry. The table still holds the revocation, so the token
// must stay inactive: a restored marker does not prove the list complete.
//
// The tokens service binds its marker to the Redis server's run_id and
// checks it on every new connection, so a marker from an earlier server
// lifetime is dropped before any lookup trusts it.
func TestRevocationRedisRestoredFromSnapshot(t *testing.T) {
	r := startRedis(t) // --save "": snapshots only when the test says SAVE
	e := rvStart(t, r, 0)
	jwtUser := e.machine("svc-jwt", "ACCESS_TOKEN_TYPE_JWT")
	opaqueUser := e.machine("svc-opaque", "ACCESS_TOKEN_TYPE_BEARER")
	toks := []*rvToken{
		e.token("control-jwt", jwtUser), e.token("control-opaque", opaqueUser),
		e.token("revoked-jwt", jwtUser), e.token("revoked-opaque", opaqueUser),
	}
	phase := "before the snapshot"
	e.check(phase, toks)
	e.waitRedisList(phase, toks) // marker written, no entries yet
	ctx := context.Background()
	if err := e.rdb.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}

	phase = "revoked after the snapshot"
	e.revoke(phase, toks[2])
	e.revoke(phase, toks[3])
	e.check(phase, toks)
	if ok, why := e.redisMatches(toks); !ok {
		t.Fatalf("%s: Redis list: %s; want the marker and the two revoked entries", phase, why)
	}

	// Crash (no shutdown save) and restart from the older snapshot.
	r.stop(syscall.SIGKILL)
	r.start()
	// The snapshot's state: the marker (of the crashed server's lifetime)
	// without the revoked entries — unless the tokens service has already
	// connected, dropped the stale marker and perhaps rebuilt the list.
	have := e.exists(rvMarker, rvEntryPrefix+toks[2].id, rvEntryPrefix+toks[3].id)
	info := e.rdb.Info(ctx, "server").Val()
	current := ""
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			current = v
		}
	}
	marker := e.rdb.Get(ctx, rvMarker).Val()
	switch {
	case current == "":
		t.Fatal("restarted Redis reports no run_id")
	case have[rvMarker] && marker != current && !have[rvEntryPrefix+toks[2].id] && !have[rvEntryPrefix+toks[3].id]:
		t.Logf("restored Redis holds the snapshot's stale marker %q (server %q) without the revoked entries", marker, current)
	case !have[rvMarker]:
		t.Logf("the tokens service already dropped the snapshot's stale marker")
	case marker == current:
		t.Logf("the tokens service already rebuilt the list for server %q", current)
	default:
		t.Fatalf("restored Redis holds %v with marker %q (server %q); want the snapshot's state: a stale marker without the revoked entries", have, marker, current)
	}
	// Longer than the 1s Redis backoff plus two 2s sync intervals: time
	// for the service to see Redis again and to consider itself in sync.
	phase = "redis restored from a snapshot older than the revocations"
	restarted := time.Now()
	rounds := 0
	for time.Since(restarted) < 6*time.Second {
		if errs := e.problems(phase+" ("+time.Since(restarted).Round(100*time.Millisecond).String()+" after restart)", toks); len(errs) > 0 {
			t.Fatalf("%s\n\nRevoked tokens are active again: the restored snapshot brought back %s (the \"list is complete\" "+
				"marker) but not the entries pushed after it, and the service trusted the stale marker "+
				"(services/tokens/internal/revocation/redis.go, checkMarker). Redis now holds %v.",
				strings.Join(errs, "\n"), rvMarker, e.exists(rvMarker, rvEntryPrefix+toks[2].id, rvEntryPrefix+toks[3].id))
		}
		rounds++
		// Paced well below edge's rate limit (1000/s): each round sends
		// eight requests, and an unpaced loop can outrun the limit.
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s: %d check rounds over %v", phase, rounds, time.Since(restarted).Round(time.Millisecond))
}

// A user's cut-off (deactivation) reaches every tokens replica through the
// revocation list: after the user is reactivated, so that only the list
// can say so, a second tokens replica still reports the old token inactive.
func TestRevocationUserCutReachesEveryReplica(t *testing.T) {
	r := startRedis(t)
	e := rvStart(t, r, 0)
	second := startProc(t, config.RoleTokens, e.d.env(t.TempDir(), "GATEHOUSE_DIRECTORY_URL", e.d.directory.base))
	m := e.machine("cut-off", "ACCESS_TOKEN_TYPE_JWT")
	old := e.token("before the cut", m)
	introspectAt := func(base, token string) bool {
		req, _ := http.NewRequest("POST", base+"/oauth/v2/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(url.QueryEscape(e.apiID), url.QueryEscape(e.apiSecret))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var in map[string]any
		_ = json.NewDecoder(res.Body).Decode(&in)
		if res.StatusCode != 200 {
			t.Fatalf("introspect at %s: %d %v", base, res.StatusCode, in)
		}
		return in["active"] == true
	}
	if !introspectAt(second.base, old.raw) {
		t.Fatal("the second replica does not see a fresh token as active")
	}
	for _, step := range []string{"_deactivate", "_reactivate"} {
		if status, res := restJSON(t, "POST", e.edge.base+"/management/v1/users/"+m.userID+"/"+step, e.admin, map[string]any{}); status != 200 {
			t.Fatalf("%s: %d %v", step, status, res)
		}
	}
	for name, base := range map[string]string{"first replica (through edge)": e.edge.base, "second replica": second.base} {
		if introspectAt(base, old.raw) {
			t.Errorf("%s: a token issued before the deactivation is active after reactivation", name)
		}
	}
	time.Sleep(1100 * time.Millisecond) // the cut covers its whole second
	fresh := e.token("after the cut", m)
	if !introspectAt(second.base, fresh.raw) {
		t.Error("second replica: a token issued after the reactivation is not active")
	}
}

// A management token is refused by the management API as soon as /revoke
// answered 200, in the distributed deployment where directory follows the
// revocation list a poll behind: directory asks the tokens service's list
// (one Redis round trip) for every call. Before, a revoked token created a
// user in 10 of 10 trials.
func TestFaultRevokedTokenRefusedByManagementAtOnce(t *testing.T) {
	r := startRedis(t)
	e := rvStart(t, r, 0)
	// Directory follows the list once it has synced it (a poll a second,
	// from when tokens is up); until then it introspects every token. The
	// trials go on past that, so they cover the followed list too.
	followed := time.Now().Add(3 * time.Second)
	for _, typ := range []string{"ACCESS_TOKEN_TYPE_JWT", "ACCESS_TOKEN_TYPE_BEARER"} {
		m := e.machine("mgr-"+typ, typ)
		if status, res := restJSON(t, "POST", e.edge.base+"/management/v1/orgs/me/members", e.admin,
			map[string]any{"userId": m.userID, "roles": []string{"ORG_USER_MANAGER"}}); status != 200 {
			t.Fatalf("AddOrgMember: %d %v", status, res)
		}
		cc := clientcredentials.Config{ClientID: m.clientID, ClientSecret: m.secret, TokenURL: e.edge.base + "/oauth/v2/token",
			Scopes: []string{"openid", mgmtAudScope}, AuthStyle: oauth2.AuthStyleInHeader}
		for i := 0; i < 5 || time.Now().Before(followed); i++ {
			tok, err := cc.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			add := func(name string) int {
				status, _ := restJSON(t, "POST", e.edge.base+"/management/v1/users/human", tok.AccessToken, map[string]any{
					"userName": name, "profile": map[string]any{"firstName": "R", "lastName": "V"}, "email": map[string]any{"email": name + "@example.com"}})
				return status
			}
			if status := add(fmt.Sprintf("before-%s-%d", typ, i)); status != 200 {
				t.Fatalf("%s: a fresh management token: %d", typ, status)
			}
			e.revoke("management", &rvToken{name: "mgmt", m: m, raw: tok.AccessToken})
			if status := add(fmt.Sprintf("after-%s-%d", typ, i)); status != http.StatusUnauthorized {
				t.Fatalf("%s, trial %d: the management API right after /revoke answered %d; want 401", typ, i, status)
			}
		}
	}
}
