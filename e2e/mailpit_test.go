package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// toolBin is a test server built from its own module under tools/,
// outside go.work, once per run (bin/NAME; an existing binary is used).
type toolBin struct {
	once sync.Once
	path string
	err  error
}

var (
	mailpitBin     toolBin
	oauth2ProxyBin toolBin
)

// build builds pkg from tools/dir into bin/name once and returns its path.
func (b *toolBin) build(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(root, "bin", name)
		if _, err := os.Stat(b.path); err == nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = filepath.Join(root, "tools", dir)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// mailpit is a real SMTP server with an HTTP API, on loopback.
type mailpit struct {
	t        *testing.T
	smtpAddr string
	api      string
	dir      string
	cmd      *exec.Cmd
}

// startMailpit starts mailpit on free loopback ports.
func startMailpit(t *testing.T) *mailpit {
	t.Helper()
	mailpitBin.build(t, "mailpit", "mailpit", "github.com/axllent/mailpit")
	m := &mailpit{t: t, smtpAddr: freeAddr(t), api: "http://" + freeAddr(t), dir: t.TempDir()}
	m.start()
	t.Cleanup(m.stop)
	return m
}

// start runs mailpit (again) on its ports, keeping its messages.
func (m *mailpit) start() {
	m.t.Helper()
	m.cmd = exec.Command(mailpitBin.path, "--smtp", m.smtpAddr, "--listen", strings.TrimPrefix(m.api, "http://"),
		"--database", filepath.Join(m.dir, "mailpit.db"), "--smtp-auth-accept-any", "--smtp-auth-allow-insecure",
		"--disable-version-check", "--quiet")
	m.cmd.Stdout, m.cmd.Stderr = os.Stderr, os.Stderr
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(m.api + "/livez")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mailpit did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends mailpit (SMTP down).
func (m *mailpit) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	m.cmd = nil
}

// env is the Gatehouse configuration that sends through this mailpit.
func (m *mailpit) env() map[string]string {
	host, port, _ := strings.Cut(m.smtpAddr, ":")
	return map[string]string{"GATEHOUSE_SMTP_HOST": host, "GATEHOUSE_SMTP_PORT": port,
		"GATEHOUSE_SMTP_FROM": "Gatehouse <id@example.com>", "GATEHOUSE_SMTP_TLS": "none"}
}

// mpMessage is a message as mailpit's API lists it.
type mpMessage struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	Subject   string `json:"Subject"`
	To        []struct {
		Address string `json:"Address"`
	} `json:"To"`
}

// messages lists the messages to address.
func (m *mailpit) messages(address string) []mpMessage {
	m.t.Helper()
	res, err := http.Get(m.api + "/api/v1/search?query=" + url.QueryEscape("to:"+address))
	if err != nil {
		m.t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Messages []mpMessage `json:"messages"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		m.t.Fatal(err)
	}
	return out.Messages
}

// waitFor returns the messages to address once there are n.
func (m *mailpit) waitFor(address string, n int) []mpMessage {
	m.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := m.messages(address)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("%d messages to %s after 30 s; want %d", len(got), address, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// text is a message's plain-text body.
func (m *mailpit) text(id string) string {
	m.t.Helper()
	res, err := http.Get(m.api + "/api/v1/message/" + url.PathEscape(id))
	if err != nil {
		m.t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Text string `json:"Text"`
		HTML string `json:"HTML"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		m.t.Fatal(err)
	}
	return out.Text
}
