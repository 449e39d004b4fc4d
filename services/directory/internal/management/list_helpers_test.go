package management_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// lstList posts a list request over REST and returns the key field of each
// result (e.g. "name") and the list details, totalResult filled in when
// proto3 JSON omitted a zero.
func lstList(t *testing.T, e *mgmttest.Env, path, token, org string, body any, key string) ([]string, map[string]any) {
	t.Helper()
	r := e.REST("POST", path, token, org, body)
	if r.Status != 200 {
		t.Fatalf("POST %s %v: %d %s", path, body, r.Status, r.Body)
	}
	var out []string
	res, _ := r.JSON["result"].([]any)
	for _, x := range res {
		out = append(out, usrStr(x.(map[string]any)[key]))
	}
	det, _ := r.JSON["details"].(map[string]any)
	if det == nil {
		t.Fatalf("POST %s: no details in %s", path, r.Body)
	}
	if det["totalResult"] == nil {
		det["totalResult"] = "0"
	}
	return out, det
}

// lstLastOfType is the sequence and time of the last event of any
// aggregate of the type.
func lstLastOfType(t *testing.T, e *mgmttest.Env, aggregateType string) (uint64, time.Time) {
	t.Helper()
	seq, at, err := e.ES.LastOfType(context.Background(), aggregateType)
	if err != nil {
		t.Fatal(err)
	}
	return seq, at
}

// lstWantDetails checks REST list details: the total, and the sequence and
// time of the last event reduced.
func lstWantDetails(t *testing.T, what string, det map[string]any, total int, seq uint64, at time.Time) {
	t.Helper()
	vt, err := time.Parse(time.RFC3339Nano, usrStr(det["viewTimestamp"]))
	if det["totalResult"] != strconv.Itoa(total) || det["processedSequence"] != strconv.FormatUint(seq, 10) || err != nil || !vt.Equal(at) {
		t.Fatalf("%s: details %v; want totalResult %d, processedSequence %d, viewTimestamp %v", what, det, total, seq, at)
	}
}

// lstText is a JSON text query.
func lstText(kind, field, value, method string) map[string]any {
	return map[string]any{kind: map[string]any{field: value, "method": method}}
}
