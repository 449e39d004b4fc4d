package proxy

import (
	"context"
	"net/http"
	"net/url"
)

// otelhttp records url.full, query string included, on every client span.
// Queries carry authorization codes and id_token_hints, which must not end up
// in a trace backend, so hideQuery removes the query before otelhttp sees the
// request and restoreQuery puts it back below it, before the wire.

type queryKey struct{}

type hideQuery struct{ next http.RoundTripper }

func (t hideQuery) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.RawQuery == "" && !r.URL.ForceQuery {
		return t.next.RoundTrip(r)
	}
	// Shallow copies: a RoundTripper must not modify the caller's request.
	r2 := r.WithContext(context.WithValue(r.Context(), queryKey{}, *r.URL))
	u := *r.URL
	u.RawQuery, u.ForceQuery = "", false
	r2.URL = &u
	return t.next.RoundTrip(r2)
}

type restoreQuery struct{ next http.RoundTripper }

func (t restoreQuery) RoundTrip(r *http.Request) (*http.Response, error) {
	orig, ok := r.Context().Value(queryKey{}).(url.URL)
	if !ok {
		return t.next.RoundTrip(r)
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.RawQuery, u.ForceQuery = orig.RawQuery, orig.ForceQuery
	r2.URL = &u
	return t.next.RoundTrip(r2)
}
