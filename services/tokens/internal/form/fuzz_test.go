package form

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// FuzzParse: any body and Authorization header give a request or an
// OAuth error — never a panic, never another kind of error.
func FuzzParse(f *testing.F) {
	f.Add("grant_type=client_credentials&scope=openid", "Basic d2ViOnNlY3JldA==")
	f.Add("a=1&a=2", "")
	f.Add("%zz=1", "Bearer x")
	f.Add(strings.Repeat("x=1&", 100), "Basic !!!")
	f.Fuzz(func(t *testing.T, body, auth string) {
		r, err := http.NewRequest(http.MethodPost, "https://id.example.com/oauth/v2/token", strings.NewReader(body))
		if err != nil {
			return
		}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		req, err := Parse(r)
		if err != nil {
			var oe *oauth.Error
			if !errors.As(err, &oe) {
				t.Fatalf("Parse: %v (%T); want an OAuth error", err, err)
			}
			return
		}
		if req.Creds.Basic && !strings.HasPrefix(strings.ToLower(auth), "basic ") {
			t.Fatalf("Basic credentials from %q", auth)
		}
	})
}
