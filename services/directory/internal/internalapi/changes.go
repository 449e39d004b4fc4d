package internalapi

import (
	"context"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// ChangeSettleTime is how long after its write a change is final: longer
// than a write transaction takes (they are short: one aggregate, no user
// think time), so a late commit of a lower sequence is still seen.
const ChangeSettleTime = 10 * time.Second

const changesLimit = 1000

// ListChanges tells other services which organizations changed, so they
// can drop what they cached of them.
func (s *Server) ListChanges(ctx context.Context, req *directoryv1.ListChangesRequest) (*directoryv1.ListChangesResponse, error) {
	changes, cursor, err := s.ES.Changes(ctx, req.GetAfterSequence(), s.Now().Add(-ChangeSettleTime), changesLimit)
	if err != nil {
		return nil, internalErr(err, "list changes")
	}
	out := &directoryv1.ListChangesResponse{Cursor: cursor, More: len(changes) == changesLimit}
	for _, c := range changes {
		out.Changes = append(out.Changes, &directoryv1.Change{Sequence: c.Sequence, OrgId: c.ResourceOwner,
			AggregateType: c.AggregateType, AggregateId: c.AggregateID, EventType: c.EventType})
	}
	return out, nil
}
