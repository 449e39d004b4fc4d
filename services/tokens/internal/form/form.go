package form

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"slices"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
)

// MaxBody bounds a form body: the largest legitimate parameter is a signed
// assertion or token of a few KiB.
const MaxBody = 64 << 10

// Request is a parsed form request.
type Request struct {
	// Values holds every body parameter, each exactly once (the first of
	// a repeatable one).
	Values map[string]string
	// Lists holds every value of the repeatable parameters that were sent.
	Lists map[string][]string
	// Creds are the client credentials the request presented.
	Creds clients.Credentials
}

// Get returns a body parameter, "" when absent.
func (r *Request) Get(name string) string { return r.Values[name] }

// Parse reads a POST form request of the token, introspection or
// revocation endpoint: invalid_request for another method, another
// content type, a malformed or oversized body, a repeated parameter, or an
// Authorization header that is not Basic.
func Parse(r *http.Request) (*Request, error) {
	if r.Method != http.MethodPost {
		return nil, oauth.New(oauth.InvalidRequest, "this endpoint accepts POST only")
	}
	values, err := Body(r)
	if err != nil {
		return nil, err
	}
	req := &Request{Values: values}
	for _, k := range Repeatable {
		if vs := r.PostForm[k]; len(vs) > 0 {
			if req.Lists == nil {
				req.Lists = map[string][]string{}
			}
			req.Lists[k] = vs
		}
	}
	if _, ok := r.Header["Authorization"]; ok {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return nil, oauth.New(oauth.InvalidRequest, "the Authorization header must use the Basic scheme")
		}
		req.Creds.Basic, req.Creds.BasicUser, req.Creds.BasicPass = true, user, pass
	}
	req.Creds.ClientID = values["client_id"]
	req.Creds.ClientSecret = values["client_secret"]
	req.Creds.Assertion = values["client_assertion"]
	req.Creds.AssertionType = values["client_assertion_type"]
	return req, nil
}

// IsForm reports whether the request declares an
// application/x-www-form-urlencoded body.
func IsForm(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// Body parses the request's form body (any method), refusing another
// content type, a malformed or oversized body and repeated parameters.
func Body(r *http.Request) (map[string]string, error) {
	if !IsForm(r) {
		return nil, oauth.New(oauth.InvalidRequest, "the body must be application/x-www-form-urlencoded").
			WithHint("send the parameters as a form body with Content-Type: application/x-www-form-urlencoded")
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(nil, r.Body, MaxBody)
	}
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, oauth.New(oauth.InvalidRequest, "the request body exceeds %d bytes", MaxBody)
		}
		return nil, oauth.New(oauth.InvalidRequest, "malformed request body")
	}
	return Single(r.PostForm)
}

// Repeatable are the parameters that may be sent more than once: a token
// exchange's targets (RFC 8693 §2.1, RFC 8707 §2).
var Repeatable = []string{"audience", "resource"}

// MaxRepeats bounds the values of a repeatable parameter.
const MaxRepeats = 20

// Single flattens a form, refusing any parameter sent more than once but
// the Repeatable ones (the first value kept; at most MaxRepeats).
func Single(v url.Values) (map[string]string, error) {
	out := make(map[string]string, len(v))
	for k, vs := range v {
		if len(vs) > MaxRepeats || (len(vs) > 1 && !slices.Contains(Repeatable, k)) {
			return nil, oauth.New(oauth.InvalidRequest, "parameter %s is repeated", k)
		}
		out[k] = vs[0]
	}
	return out, nil
}
