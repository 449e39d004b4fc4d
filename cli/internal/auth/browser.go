package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// BrowserLogin is one authorization code + PKCE sign-in on a loopback
// redirect (RFC 8252 §7.3: an IP literal, a port chosen now; Gatehouse
// accepts any port for the native app's registered loopback URI).
type BrowserLogin struct {
	Client   *Client
	ClientID string
	// Open shows the URL to the user; nil opens the system browser.
	Open func(authURL string) error
	// Timeout bounds the wait for the browser to come back.
	Timeout time.Duration
}

// Run listens on 127.0.0.1, sends the user to the authorization endpoint
// and exchanges the code the browser brings back.
func (b *BrowserLogin) Run(ctx context.Context) (*Token, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("browser login: loopback listener: %w", err)
	}
	defer ln.Close()
	redirectURI := fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port)
	verifier := secrets.RandomToken(48) // 64 characters of the unreserved set
	sum := sha256.Sum256([]byte(verifier))
	state := secrets.RandomToken(24)
	q := url.Values{
		"client_id":             {b.ClientID},
		"redirect_uri":          {redirectURI},
		"response_type":         {"code"},
		"scope":                 {sessionScopes + " email offline_access"},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	authURL := b.Client.endpoint("/oauth/v2/authorize") + "?" + q.Encode()

	type result struct {
		code string
		err  error
	}
	done := make(chan result, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query()
		var res result
		switch {
		case p.Get("state") != state:
			// Not our request (or a forged one): answer, but keep waiting.
			http.Error(w, "unexpected state", http.StatusBadRequest)
			return
		case p.Get("error") != "":
			res.err = &OAuthError{Status: http.StatusBadRequest, Code: p.Get("error"), Description: p.Get("error_description")}
		case p.Get("code") == "":
			res.err = errors.New("browser login: no code in the redirect")
		default:
			res.code = p.Get("code")
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		msg := "You are signed in to the gatehouse CLI. You can close this window."
		if res.err != nil {
			w.WriteHeader(http.StatusBadRequest)
			msg = "Sign-in failed: " + res.err.Error()
		}
		fmt.Fprintf(w, `<!DOCTYPE html><html lang="en"><head><title>gatehouse CLI</title></head><body><main><h1>gatehouse CLI</h1><p>%s</p></main></body></html>`, html.EscapeString(msg))
		select {
		case done <- res:
		default:
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	open := b.Open
	if open == nil {
		open = OpenBrowser
	}
	if err := open(authURL); err != nil {
		return nil, fmt.Errorf("browser login: %w", err)
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(timeout):
		return nil, fmt.Errorf("browser login: no answer from the browser within %s", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if res.err != nil {
		return nil, res.err
	}
	return b.Client.Exchange(ctx, b.ClientID, res.code, redirectURI, verifier)
}

// OpenBrowser opens url in the system browser.
func OpenBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open a browser (use --no-browser): %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
