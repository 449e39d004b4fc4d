package form_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
)

// FuzzBasicCredentials: client_secret_basic credentials survive the trip
// a client makes them take (RFC 6749 §2.3.1: form-urlencode id and
// secret, join with ":", Base64) and the token endpoint's reading of it
// (form.Parse, then Credentials.DecodeBasic) exactly, whatever bytes they
// hold: ":", "%", "+", spaces, invalid UTF-8. Any Authorization header
// value at all yields credentials or an invalid_request error, never a
// panic, and Basic credentials only from the Basic scheme.
func FuzzBasicCredentials(f *testing.F) {
	f.Add("web", "s3cr3t", "Basic d2ViOnNlY3JldA==")
	f.Add("a:b", "c:d", "basic YTpiOmM6ZA==")
	f.Add("a+b c", "100%", "Basic JXp6OnA=")
	f.Add("é\xff", "", "Basic Og==")
	f.Add("", "only-secret", "Basic")
	f.Add("x", "y", "Basic !!!")
	f.Add("x", "y", "Bearer eyJ")
	f.Fuzz(func(t *testing.T, id, secret, header string) {
		// The round trip.
		enc := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
		r := basicRequest("Basic " + enc)
		req, err := form.Parse(r)
		if err != nil {
			t.Fatalf("Parse of encoded (%q, %q): %v", id, secret, err)
		}
		gotID, gotSecret, err := req.Creds.DecodeBasic()
		if err != nil || gotID != id || gotSecret != secret {
			t.Fatalf("(%q, %q) came back as (%q, %q), %v", id, secret, gotID, gotSecret, err)
		}

		// Any header.
		r = basicRequest(header)
		if r == nil {
			return
		}
		req, err = form.Parse(r)
		if err != nil {
			if !errors.Is(err, oauth.ErrInvalidRequest) {
				t.Fatalf("Parse with Authorization %q: %v; want invalid_request", header, err)
			}
			return
		}
		if !req.Creds.Basic {
			return
		}
		if scheme, _, _ := strings.Cut(header, " "); !strings.EqualFold(scheme, "Basic") {
			t.Fatalf("Basic credentials from Authorization %q", header)
		}
		if _, _, err := req.Creds.DecodeBasic(); err != nil && !errors.Is(err, oauth.ErrInvalidRequest) {
			t.Fatalf("DecodeBasic of %q: %v; want invalid_request", header, err)
		}
	})
}

// basicRequest is a token request with Authorization: header (nil when
// net/http would not send that value).
func basicRequest(header string) *http.Request {
	if strings.ContainsAny(header, "\r\n\x00") {
		return nil
	}
	r := httptest.NewRequest(http.MethodPost, "/oauth/v2/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", header)
	return r
}
