package authorize

import (
	"net/url"
	"strconv"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// Target is a redirect_uri that is safe to send a response to.
type Target struct {
	RedirectURI string
	State       string
	Fragment    bool   // implicit response types answer in the fragment
	Issuer      string // sent as iss (RFC 9207) when set
}

// URL returns the redirect carrying v plus state and iss: in the query
// (keeping the registered URI's own query) or in the fragment.
func (t *Target) URL(v url.Values) string {
	if t.State != "" {
		v.Set("state", t.State)
	}
	if t.Issuer != "" {
		v.Set("iss", t.Issuer)
	}
	u, err := url.Parse(t.RedirectURI)
	if err != nil { // validated before a Target is made
		return t.RedirectURI
	}
	if t.Fragment {
		u.Fragment = ""
		u.RawFragment = ""
		return u.String() + "#" + v.Encode()
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Failure is an authorization error and where it goes: Target nil means
// the redirect_uri cannot be trusted and the error page shows it.
type Failure struct {
	Err    *oauth.Error
	Target *Target
}

func pageFailure(err error) *Failure { return &Failure{Err: oauth.As(err)} }

// Fail returns a Failure sent to the request's redirect_uri.
func (r *Request) Fail(code, format string, args ...any) *Failure {
	return &Failure{Err: oauth.New(code, format, args...), Target: r.Target()}
}

// FailWith returns err (made an OAuth error) as a Failure sent to the
// request's redirect_uri.
func (r *Request) FailWith(err error) *Failure {
	return &Failure{Err: oauth.As(err), Target: r.Target()}
}

// RedirectURL is where a redirectable failure sends the browser.
func (f *Failure) RedirectURL() string {
	v := url.Values{"error": {f.Err.Code}}
	if f.Err.Description != "" {
		v.Set("error_description", f.Err.Description)
	}
	return f.Target.URL(v)
}

// Status is the HTTP status of the error page.
func (f *Failure) Status() int {
	if f.Err.Status != 0 {
		return f.Err.Status
	}
	return 400
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
