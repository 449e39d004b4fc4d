package management_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// appHasher hashes secrets like the service under test (mgmttest's master
// key), so tests can check what is stored.
func appHasher(t *testing.T) *secrets.Hasher {
	t.Helper()
	h, err := secrets.NewHasher(bytes.Repeat([]byte{42}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// appWriteDetails checks the details of a write against the event it added.
func appWriteDetails(t *testing.T, what string, d *managementv1.ObjectDetails, ev eventstore.Event, org string) {
	t.Helper()
	if d.GetSequence() != ev.Sequence || !d.GetCreationDate().AsTime().Equal(ev.CreatedAt) ||
		!d.GetChangeDate().AsTime().Equal(ev.CreatedAt) || d.GetResourceOwner() != org {
		t.Fatalf("%s details = %v; want sequence %d, dates %v, owner %s", what, d, ev.Sequence, ev.CreatedAt, org)
	}
}

// appReadDetails checks the details of a read: creation from first, change
// and sequence from last.
func appReadDetails(t *testing.T, what string, d *managementv1.ObjectDetails, first, last eventstore.Event, org string) {
	t.Helper()
	if d.GetSequence() != last.Sequence || !d.GetCreationDate().AsTime().Equal(first.CreatedAt) ||
		!d.GetChangeDate().AsTime().Equal(last.CreatedAt) || d.GetResourceOwner() != org {
		t.Fatalf("%s read details = %v; want sequence %d, created %v, changed %v, owner %s",
			what, d, last.Sequence, first.CreatedAt, last.CreatedAt, org)
	}
}

// appRESTDetails checks REST JSON details against an event (write details).
func appRESTDetails(t *testing.T, what string, r *mgmttest.Response, key string, ev eventstore.Event, org string) {
	t.Helper()
	obj := r.JSON
	if key != "" {
		obj, _ = r.JSON[key].(map[string]any)
	}
	det, _ := obj["details"].(map[string]any)
	created, _ := time.Parse(time.RFC3339Nano, appStr(det["creationDate"]))
	changed, _ := time.Parse(time.RFC3339Nano, appStr(det["changeDate"]))
	if appStr(det["sequence"]) != strconv.FormatUint(ev.Sequence, 10) || !created.Equal(ev.CreatedAt) ||
		!changed.Equal(ev.CreatedAt) || det["resourceOwner"] != org {
		t.Fatalf("%s REST details = %v; want sequence %d, dates %v, owner %s", what, det, ev.Sequence, ev.CreatedAt, org)
	}
}

func appStr(v any) string {
	s, _ := v.(string)
	return s
}

// appRefused sends a REST request that must fail with status and
// google.rpc code, and add no events.
func appRefused(t *testing.T, e *mgmttest.Env, name, method, path string, body any, status, code int) {
	t.Helper()
	before := e.EventCount()
	r := e.REST(method, path, e.AdminToken, "", body)
	if r.Status != status || r.Code() != code {
		t.Fatalf("%s: status %d code %d %s; want %d code %d", name, r.Status, r.Code(), r.Body, status, code)
	}
	if _, typ := r.Detail(); typ != "type.googleapis.com/gatehouse.management.v1.ErrorDetail" {
		t.Fatalf("%s: error detail type %q; want ErrorDetail", name, typ)
	}
	if after := e.EventCount(); after != before {
		t.Fatalf("%s: refused request added %d events", name, after-before)
	}
}

// appOK sends a REST request as the admin that must succeed.
func appOK(t *testing.T, e *mgmttest.Env, name, method, path string, body any) *mgmttest.Response {
	t.Helper()
	r := e.REST(method, path, e.AdminToken, "", body)
	if r.Status != 200 {
		t.Fatalf("%s: status %d %s; want 200", name, r.Status, r.Body)
	}
	return r
}

// appNewProject creates a project over REST as token in org.
func appNewProject(t *testing.T, e *mgmttest.Env, token, org, name string) string {
	t.Helper()
	r := e.REST("POST", "/management/v1/projects", token, org, map[string]any{"name": name})
	if r.Status != 200 {
		t.Fatalf("AddProject %q: %d %s", name, r.Status, r.Body)
	}
	return appStr(r.JSON["id"])
}
