package restapi

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzDecodeUnreserved: decoding the unreserved escapes of a path never
// changes what the path means (a full decode of both is equal), never
// adds a "/" or "%", and is idempotent.
func FuzzDecodeUnreserved(f *testing.F) {
	for _, s := range []string{"/management/v1/users/%5Fbulk", "/a%2Fb/%2541", "/%7e%41%2d", "%", "%4", "/x%zz", "/%C3%A9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		d := decodeUnreserved(p)
		if decodeUnreserved(d) != d {
			t.Fatalf("not idempotent: %q → %q → %q", p, d, decodeUnreserved(d))
		}
		if strings.Count(d, "/") != strings.Count(p, "/") || strings.Count(d, "%") > strings.Count(p, "%") {
			t.Fatalf("%q → %q changed the path's structure", p, d)
		}
		want, err1 := url.PathUnescape(p)
		got, err2 := url.PathUnescape(d)
		if err1 == nil && (err2 != nil || got != want) {
			t.Fatalf("%q → %q changed the meaning: %q vs %q (%v)", p, d, want, got, err2)
		}
	})
}
