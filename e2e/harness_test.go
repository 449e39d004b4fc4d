package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	authnsvc "github.com/gatehouse-id/gatehouse/services/authn/service"
	directorysvc "github.com/gatehouse-id/gatehouse/services/directory/service"
	edgesvc "github.com/gatehouse-id/gatehouse/services/edge/service"
	tokenssvc "github.com/gatehouse-id/gatehouse/services/tokens/service"
)

// builds maps each role to the Build its cmd main uses.
var builds = map[config.Role]process.Build{
	config.RoleEdge: edgesvc.Build,
	config.RoleAuthn: func(ctx context.Context, env process.Env) (process.Component, error) {
		return authnsvc.New(ctx, env, authnsvc.Deps{})
	},
	config.RoleTokens: func(ctx context.Context, env process.Env) (process.Component, error) {
		return tokenssvc.New(ctx, env, tokenssvc.Deps{})
	},
	config.RoleDirectory: func(ctx context.Context, env process.Env) (process.Component, error) {
		return directorysvc.New(ctx, env, directorysvc.Deps{})
	},
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct{ testutil.SyncBuffer }

// Lines returns the JSON log records written so far.
func (s *syncBuffer) Lines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// proc is one Gatehouse process running inside the test binary, exactly as
// its cmd main runs it (process.Run), with its own environment and log.
type proc struct {
	role   config.Role
	base   string
	log    *syncBuffer
	cancel context.CancelFunc
	done   chan int
}

func startProc(t *testing.T, role config.Role, env map[string]string) *proc {
	t.Helper()
	if _, ok := env["GATEHOUSE_ADDR"]; !ok {
		env["GATEHOUSE_ADDR"] = "127.0.0.1:0"
	}
	if _, ok := env["GATEHOUSE_DRAIN_DELAY"]; !ok {
		env["GATEHOUSE_DRAIN_DELAY"] = "0s" // tests stop at once; TestDrain checks the delay
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{role: role, log: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	addr := make(chan string, 1)
	go func() {
		p.done <- process.Run(ctx, role, func(k string) string { return env[k] }, p.log, builds[role], func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		p.base = "http://" + a
	case code := <-p.done:
		cancel()
		t.Fatalf("%s exited with %d before listening:\n%s", role, code, p.log)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("%s did not start:\n%s", role, p.log)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends the equivalent of SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	select {
	case code := <-p.done:
		if code != process.ExitOK {
			t.Errorf("%s exited with %d; want 0:\n%s", p.role, code, p.log)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop", p.role)
	}
}

func do(t *testing.T, method, url string, body io.Reader, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// requestLine finds the access-log record of the request with id. Access
// logs are written after the response, so it waits a little for the line.
func requestLine(log *syncBuffer, id string) map[string]any {
	for range 100 {
		for _, l := range log.Lines() {
			if l["msg"] == "request" && l["request_id"] == id {
				return l
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// noRequestLine reports whether log has no record of request id.
func noRequestLine(log *syncBuffer, id string) bool {
	for _, l := range log.Lines() {
		if l["msg"] == "request" && l["request_id"] == id {
			return false
		}
	}
	return true
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// distributed is the four-process deployment on PostgreSQL and Redis.
type distributed struct {
	issuer                         string
	dbURL                          string // the deployment's own PostgreSQL database
	directoryData                  string // holds bootstrap-admin-key.json
	directory, tokens, authn, edge *proc
	// env is a process environment of this deployment (more replicas).
	env func(dataDir string, kv ...string) map[string]string
}

// startDistributed starts directory, tokens, authn and edge as separate
// processes on a fresh PostgreSQL database and redisURL, and waits until
// each is ready. Directory introspects through tokens and tokens reads
// keys from directory: tokens' address is reserved so directory starts
// first.
func startDistributed(t *testing.T, redisURL string) *distributed {
	t.Helper()
	return startDistributedWith(t, redisURL)
}

// startDistributedWith is startDistributed with the variables of kv (name,
// value, ...) set in every process.
func startDistributedWith(t *testing.T, redisURL string, kv ...string) *distributed {
	t.Helper()
	dbURL := testutil.PostgresDatabase(t)
	edgeAddr, tokensAddr := freeAddr(t), freeAddr(t)
	d := &distributed{issuer: "http://" + edgeAddr, dbURL: dbURL, directoryData: t.TempDir()}
	env := func(dataDir string, more ...string) map[string]string {
		return distributedEnv(dbURL, redisURL, d.issuer, dataDir, append(slices.Clone(kv), more...)...)
	}
	d.env = env
	d.directory = startProc(t, config.RoleDirectory, env(d.directoryData, "GATEHOUSE_TOKENS_URL", "http://"+tokensAddr))
	d.tokens = startProc(t, config.RoleTokens, env(t.TempDir(), "GATEHOUSE_ADDR", tokensAddr, "GATEHOUSE_DIRECTORY_URL", d.directory.base))
	d.authn = startProc(t, config.RoleAuthn, env(t.TempDir(), "GATEHOUSE_DIRECTORY_URL", d.directory.base, "GATEHOUSE_TOKENS_URL", d.tokens.base))
	d.edge = startProc(t, config.RoleEdge, env(t.TempDir(), "GATEHOUSE_ADDR", edgeAddr,
		"GATEHOUSE_AUTHN_URL", d.authn.base, "GATEHOUSE_TOKENS_URL", d.tokens.base, "GATEHOUSE_DIRECTORY_URL", d.directory.base))
	for _, p := range []*proc{d.directory, d.tokens, d.authn, d.edge} {
		if res, body := do(t, "GET", p.base+"/readyz", nil, nil); res.StatusCode != 200 {
			t.Fatalf("%s /readyz = %d %s", p.role, res.StatusCode, body)
		}
	}
	return d
}

// distributedEnv is the environment of one process of a distributed
// deployment on dbURL and redisURL behind issuer, keeping its files in
// dataDir, with the variables of kv (name, value, name, value, ...) added.
func distributedEnv(dbURL, redisURL, issuer, dataDir string, kv ...string) map[string]string {
	m := map[string]string{
		"GATEHOUSE_DATABASE_URL":   dbURL,
		"GATEHOUSE_REDIS_URL":      redisURL,
		"GATEHOUSE_ISSUER":         issuer,
		"GATEHOUSE_MASTER_KEY":     base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)),
		"GATEHOUSE_INTERNAL_TOKEN": strings.Repeat("i", 40),
		"GATEHOUSE_DATA_DIR":       dataDir,
		"GATEHOUSE_RATE_LIMIT":     "1000",
		"GATEHOUSE_RATE_BURST":     "1000",
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
		// Identity providers of the federation tests run on loopback.
		"GATEHOUSE_IDP_ALLOW_LOOPBACK": "true",
		// A service logs each request at debug level; tests read the lines.
		"GATEHOUSE_LOG_LEVEL": "debug",
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// operatorToken reads the bootstrap key file from dataDir (the directory
// process's data directory) and exchanges a JWT profile assertion for a
// management token at base's token endpoint. It returns the key file and
// the whole token response.
func operatorToken(t *testing.T, base, dataDir, issuer string) (keyFile, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "bootstrap-admin-key.json"))
	if err != nil {
		t.Fatalf("bootstrap key file in %s: %v", dataDir, err)
	}
	var kf keyFile
	if err := json.Unmarshal(raw, &kf); err != nil {
		t.Fatalf("bootstrap key file: %v", err)
	}
	status, tok := postForm(t, base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	})
	if access, _ := tok["access_token"].(string); status != 200 || access == "" || tok["token_type"] != "Bearer" {
		t.Fatalf("JWT profile grant: %d %v", status, tok)
	}
	return kf, tok
}
