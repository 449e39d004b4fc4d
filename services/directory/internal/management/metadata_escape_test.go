package management_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// escapeSegment percent-encodes a path segment, ':' included (the last
// segment's ':' would otherwise start a google.api.http verb).
func escapeSegment(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
}

// Metadata keys with "/", "%" and other reserved characters are addressed
// by their percent-encoded form in REST paths, decoded exactly once: the
// key set over REST is the key read over gRPC, and back.
func TestMetadataKeysNeedingEscapes(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		id := e.SeedUser(e.OrgID, "escapes")
		base := "/management/v1/users/" + id + "/metadata/"
		keys := []string{"a/b", "/lead", "trail/", "50%", "a%41", "%2F", "x:y", "q?u#e;r,y", "sp ace", "grüße", "a+b&c=d", "_bulk/x"}

		for _, k := range keys {
			r := e.REST("POST", base+escapeSegment(k), e.AdminToken, "", map[string]any{"value": b64("v " + k)})
			if r.Status != 200 {
				t.Fatalf("set %q: %d %s", k, r.Status, r.Body)
			}
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if got := mdKeys(t, e, id); !slices.Equal(got, want) {
			t.Fatalf("stored keys %q; want %q", got, want)
		}
		c := e.Client("grpc", e.AdminToken, "")
		for _, k := range keys {
			r := e.REST("GET", base+escapeSegment(k), e.AdminToken, "", nil)
			md, _ := r.JSON["metadata"].(map[string]any)
			if r.Status != 200 || md["key"] != k || md["value"] != b64("v "+k) {
				t.Errorf("get %q over REST: %d %s", k, r.Status, r.Body)
			}
			res, err := c.GetUserMetadata(ctx, &managementv1.GetUserMetadataRequest{Id: id, Key: k})
			if err != nil || string(res.GetMetadata().GetValue()) != "v "+k {
				t.Errorf("get %q over gRPC: %v", k, err)
			}
		}
		// Unreserved characters may be encoded or not: the same key.
		if r := e.REST("GET", base+"gr%C3%BC%C3%9Fe", e.AdminToken, "", nil); r.Status != 200 {
			t.Errorf("get with encoded non-ASCII: %d %s", r.Status, r.Body)
		}
		if r := e.REST("GET", base+"%61%2F%62", e.AdminToken, "", nil); r.Status != 200 { // "a/b"
			t.Errorf("get with encoded unreserved characters: %d %s", r.Status, r.Body)
		}
		// Literal segments still route when their unreserved characters are
		// encoded: this is the bulk removal, not a key named "_bulk".
		r := e.REST("DELETE", base+"%5Fbulk", e.AdminToken, "", map[string]any{"keys": []string{"a/b", "50%"}})
		if r.Status != 200 || slices.Contains(mdKeys(t, e, id), "a/b") || slices.Contains(mdKeys(t, e, id), "50%") {
			t.Fatalf("bulk removal via %%5Fbulk: %d %s", r.Status, r.Body)
		}
		// "a%41" is its own key: the encoded "%" is not decoded a second time.
		if r := e.REST("GET", base+"aA", e.AdminToken, "", nil); r.Status != 404 {
			t.Fatalf("get \"aA\": %d %s; want 404 (only \"a%%41\" exists)", r.Status, r.Body)
		}
		for _, k := range []string{"a%41", "x:y", "_bulk/x", "/lead"} {
			if r := e.REST("DELETE", base+escapeSegment(k), e.AdminToken, "", nil); r.Status != 200 {
				t.Errorf("delete %q: %d %s", k, r.Status, r.Body)
			}
		}
		if got := mdKeys(t, e, id); len(got) != len(keys)-6 || slices.Contains(got, "a%41") || slices.Contains(got, "/lead") {
			t.Fatalf("keys after deletes %q", got)
		}
		// The user id segment is decoded once too: the route matches and the
		// handler answers that no user "<id>/x" exists.
		r = e.REST("GET", "/management/v1/users/"+url.PathEscape(id+"/x")+"/metadata/trail%2F", e.AdminToken, "", nil)
		if r.Status != 404 || r.Code() != int(connect.CodeNotFound) {
			t.Fatalf("user id with an encoded slash: %d %s; want the API's 404 NotFound", r.Status, r.Body)
		}
		if r := e.REST("GET", base+"trail%2F", e.AdminToken, "", nil); r.Status != 200 {
			t.Fatalf("get \"trail/\": %d %s", r.Status, r.Body)
		}
	})
}
