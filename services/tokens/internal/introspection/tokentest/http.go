package tokentest

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Quiet discards log output.
var Quiet = slog.New(slog.DiscardHandler)

// Response is what a request got.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as a JSON object.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

// Error returns the body's error code ("" when there is none).
func (r *Response) Error() string {
	var m struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &m)
	return m.Error
}

// Call sends method to base+path over real HTTP: with a non-nil body as an
// application/x-www-form-urlencoded form, after edit (if not nil) has
// adjusted the request.
func Call(t testing.TB, method, target string, body url.Values, edit func(*http.Request)) *Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if edit != nil {
		edit(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Basic sets client_secret_basic credentials (RFC 6749 §2.3.1: each part
// form-encoded first).
func Basic(id, secret string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret)) }
}

// Bearer sets an Authorization: Bearer header.
func Bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}
