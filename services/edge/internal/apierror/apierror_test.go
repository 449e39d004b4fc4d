package apierror

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gatehouse-id/gatehouse/services/edge/internal/reqinfo"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, http.StatusServiceUnavailable, TemporarilyUnavailable, `tokens "service" unavailable`)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("got status %d; want 503", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("got content type %q; want application/json", ct)
	}
	var got map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body.String(), err)
	}
	if got["error"] != TemporarilyUnavailable || got["error_description"] != `tokens "service" unavailable` {
		t.Fatalf("got body %v; want error and escaped description", got)
	}

	rec = httptest.NewRecorder()
	Write(rec, http.StatusNotFound, NotFound, "")
	if rec.Body.String() != "{\"error\":\"not_found\"}\n" {
		t.Fatalf("got body %q; want only the error field", rec.Body.String())
	}
}

// A request is answered in an RPC protocol only where its route takes
// RPCs and only when it declares one; the look before connect-go's
// classification takes every request that classification takes.
func TestWriteRPC(t *testing.T) {
	cases := []struct {
		name, method, target string
		header               map[string]string
		form                 reqinfo.ErrorForm
		want                 bool
	}{
		{"gRPC", "POST", "/x", map[string]string{"Content-Type": "application/grpc"}, reqinfo.ErrorsRPC, true},
		{"gRPC, upper case", "POST", "/x", map[string]string{"Content-Type": "Application/GRPC+proto"}, reqinfo.ErrorsRPC, true},
		{"gRPC-web", "POST", "/x", map[string]string{"Content-Type": "application/grpc-web+proto"}, reqinfo.ErrorsRPC, true},
		// connect-go writes no base64 gRPC-web: the JSON error.
		{"gRPC-web-text", "POST", "/x", map[string]string{"Content-Type": "application/grpc-web-text+proto"}, reqinfo.ErrorsRPC, false},
		{"Connect", "POST", "/x", map[string]string{"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}, reqinfo.ErrorsRPC, true},
		{"Connect streaming", "POST", "/x", map[string]string{"Content-Type": "application/connect+json"}, reqinfo.ErrorsRPC, true},
		{"Connect GET", "GET", "/x?connect=v1&encoding=json&message=%7B%7D", nil, reqinfo.ErrorsRPC, true},
		{"Connect without its header", "POST", "/x", map[string]string{"Content-Type": "application/json"}, reqinfo.ErrorsRPC, false},
		{"plain GET", "GET", "/x?a=b", nil, reqinfo.ErrorsRPC, false},
		{"form POST", "POST", "/x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, reqinfo.ErrorsRPC, false},
		{"gRPC on a JSON route", "POST", "/x", map[string]string{"Content-Type": "application/grpc"}, reqinfo.ErrorsJSON, false},
		{"gRPC on a page", "POST", "/x", map[string]string{"Content-Type": "application/grpc"}, reqinfo.ErrorsPage, false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.target, nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		if got := mayBeRPC(r) && rpcErrors.IsSupported(r); got != rpcErrors.IsSupported(r) {
			t.Errorf("%s: the look before the classification says %v; the classification %v", c.name, mayBeRPC(r), rpcErrors.IsSupported(r))
		}
		r = r.WithContext(reqinfo.NewContext(r.Context(), &reqinfo.Info{Errors: c.form}))
		rec := httptest.NewRecorder()
		if got := WriteRPC(rec, r, RateLimited, "slow down"); got != c.want {
			t.Errorf("%s: WriteRPC = %v; want %v", c.name, got, c.want)
		}
		if written := rec.Header().Get("Content-Type") != ""; written != c.want {
			t.Errorf("%s: wrote an answer: %v; want %v", c.name, written, c.want)
		}
	}
}
