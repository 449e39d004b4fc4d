package management

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// writeDetails are the details of a manipulation: the sequence and time of
// the (last) event added; on a create the creation date is that time too.
func writeDetails(evs []eventstore.Event) *managementv1.ObjectDetails {
	if len(evs) == 0 {
		return nil
	}
	last := evs[len(evs)-1]
	ts := timestamppb.New(last.CreatedAt)
	return &managementv1.ObjectDetails{Sequence: last.Sequence, CreationDate: ts, ChangeDate: ts, ResourceOwner: last.ResourceOwner}
}

// readDetails are the details of a projected object: its first event's time,
// and the sequence and time of the last event reduced into it.
func readDetails(creation, change time.Time, sequence uint64, owner string) *managementv1.ObjectDetails {
	return &managementv1.ObjectDetails{
		Sequence:      sequence,
		CreationDate:  timestamppb.New(creation),
		ChangeDate:    timestamppb.New(change),
		ResourceOwner: owner,
	}
}
