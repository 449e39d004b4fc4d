package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/process"
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
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Lines returns the JSON log records written so far.
func (s *syncBuffer) Lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
