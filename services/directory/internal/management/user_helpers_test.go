package management_test

import (
	"strconv"
	"testing"
	"time"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
)

// usrWantWrite checks the details of a write against the event it added.
func usrWantWrite(t *testing.T, what string, det *managementv1.ObjectDetails, ev eventstore.Event) {
	t.Helper()
	if det.GetSequence() != ev.Sequence || !det.GetCreationDate().AsTime().Equal(ev.CreatedAt) ||
		!det.GetChangeDate().AsTime().Equal(ev.CreatedAt) || det.GetResourceOwner() != ev.ResourceOwner {
		t.Fatalf("%s: details %v; want sequence %d, dates %v, owner %s", what, det, ev.Sequence, ev.CreatedAt, ev.ResourceOwner)
	}
}

// usrWantRead checks read details: first event's date, last event's
// sequence and date.
func usrWantRead(t *testing.T, what string, det *managementv1.ObjectDetails, first, last eventstore.Event) {
	t.Helper()
	if det.GetSequence() != last.Sequence || !det.GetCreationDate().AsTime().Equal(first.CreatedAt) ||
		!det.GetChangeDate().AsTime().Equal(last.CreatedAt) || det.GetResourceOwner() != first.ResourceOwner {
		t.Fatalf("%s: details %v; want sequence %d, created %v, changed %v, owner %s", what, det, last.Sequence,
			first.CreatedAt, last.CreatedAt, first.ResourceOwner)
	}
}

// usrWantWriteJSON checks REST details (uint64 as a string, RFC 3339 dates).
func usrWantWriteJSON(t *testing.T, what string, r *mgmttest.Response, ev eventstore.Event) {
	t.Helper()
	det, _ := r.JSON["details"].(map[string]any)
	created, err1 := time.Parse(time.RFC3339Nano, usrStr(det["creationDate"]))
	changed, err2 := time.Parse(time.RFC3339Nano, usrStr(det["changeDate"]))
	if det["sequence"] != strconv.FormatUint(ev.Sequence, 10) || err1 != nil || err2 != nil ||
		!created.Equal(ev.CreatedAt) || !changed.Equal(ev.CreatedAt) || det["resourceOwner"] != ev.ResourceOwner {
		t.Fatalf("%s: details %v; want sequence %d, dates %v, owner %s", what, det, ev.Sequence, ev.CreatedAt, ev.ResourceOwner)
	}
}

func usrStr(v any) string { s, _ := v.(string); return s }

// usrLast returns the last stored event of an aggregate.
func usrLast(t *testing.T, e *mgmttest.Env, id string) eventstore.Event {
	t.Helper()
	evs := e.Events(id)
	if len(evs) == 0 {
		t.Fatalf("no events for %s", id)
	}
	return evs[len(evs)-1]
}

// usrRefused sends a REST request that must fail with status and gRPC
// code and add no event.
func usrRefused(t *testing.T, e *mgmttest.Env, what, method, path, token, org string, body any, status, code int) *mgmttest.Response {
	t.Helper()
	before := e.EventCount()
	r := e.REST(method, path, token, org, body)
	if r.Status != status || r.Code() != code {
		t.Fatalf("%s: status %d code %d %s; want %d code %d", what, r.Status, r.Code(), r.Body, status, code)
	}
	if _, typ := r.Detail(); typ != "type.googleapis.com/gatehouse.management.v1.ErrorDetail" {
		t.Fatalf("%s: detail type %q; want ErrorDetail", what, typ)
	}
	if after := e.EventCount(); after != before {
		t.Fatalf("%s: refused request added %d events", what, after-before)
	}
	return r
}
