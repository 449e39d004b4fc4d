package mint

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendJSON writes exactly what encoding/json writes for the response.
func TestResponseAppendJSON(t *testing.T) {
	for _, r := range []Response{
		{AccessToken: "eyJhbGciOiJFUzI1NiJ9.e30.sig", TokenType: "Bearer", ExpiresIn: 43200},
		{AccessToken: "abc_-123", TokenType: "Bearer", ExpiresIn: 0, Scope: "openid profile", IDToken: "x.y.z", RefreshToken: "r"},
		{AccessToken: "a\"b\\c<d>&\u2028é\x01", TokenType: "Bearer", ExpiresIn: -5, Scope: "urn:x:y"},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(&r); err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("got %s; want %s", got, want.Bytes())
		}
	}
}

func BenchmarkResponseAppendJSON(b *testing.B) {
	r := Response{AccessToken: "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiSldUIn0.eyJpc3MiOiJodHRwOi8vbG9jYWxob3N0In0.c2ln",
		TokenType: "Bearer", ExpiresIn: 43200, Scope: "openid"}
	b.ReportAllocs()
	for b.Loop() {
		_ = r.AppendJSON(make([]byte, 0, 256))
	}
}
