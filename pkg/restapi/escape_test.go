package restapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDecodeUnreserved(t *testing.T) {
	for in, want := range map[string]string{
		"/users/1/metadata/a":          "/users/1/metadata/a",
		"/m/%5Fbulk":                   "/m/_bulk",
		"/m/%61%2F%62":                 "/m/a%2Fb",
		"/m/%7e%2d%2E%30":              "/m/~-.0",
		"/m/50%25":                     "/m/50%25",
		"/m/a%2541":                    "/m/a%2541",
		"/m/x%3Ay":                     "/m/x%3Ay",
		"/m/gr%C3%BC%C3%9Fe":           "/m/gr%C3%BC%C3%9Fe",
		"/m/%":                         "/m/%",
		"/m/%4":                        "/m/%4",
		"/m/%zz":                       "/m/%zz",
		"/pkg.v1.Service/%47etThing":   "/pkg.v1.Service/GetThing",
		"/pkg.v1.Service/GetThing":     "/pkg.v1.Service/GetThing",
		"/m/%2f%2F":                    "/m/%2f%2F",
		"/m/a%20b":                     "/m/a%20b",
		"/m/%41%42%43%44%45%46%47%48%": "/m/ABCDEFGH%",
	} {
		if got := decodeUnreserved(in); got != want {
			t.Errorf("decodeUnreserved(%q) = %q; want %q", in, got, want)
		}
	}
}

// The wrapped handler sees the encoded path; the caller's request is not
// changed.
func TestEscapedPath(t *testing.T) {
	var seen string
	h := escapedPath(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		seen = r.URL.Path
	}))
	r := httptest.NewRequest("GET", "/users/1/metadata/a%2Fb%25c", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != "/users/1/metadata/a%2Fb%25c" {
		t.Fatalf("handler saw %q", seen)
	}
	if r.URL.Path != "/users/1/metadata/a/b%c" {
		t.Fatalf("the caller's request changed: %q", r.URL.Path)
	}
	r = httptest.NewRequest("GET", "/plain/path", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != "/plain/path" {
		t.Fatalf("handler saw %q", seen)
	}
}
