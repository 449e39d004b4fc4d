package metadata

import (
	"context"
	"fmt"
	"strings"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Commands produces metadata events on the user aggregate.
type Commands struct {
	ES *eventstore.Store
	Q  *Queries
}

// Set adds or replaces entries of u in one change (one Push, one event per
// entry), expecting u at the version it was read. Every entry is checked
// first (its limits were, by the caller: see CheckEntries): any problem is
// InvalidArgument and nothing is written. Setting a key to its current
// value is a change like any other (ZITADEL does not refuse it either). A
// concurrent change of u is Aborted.
func (c *Commands) Set(ctx context.Context, editor string, u *users.User, entries []Entry) ([]eventstore.Event, error) {
	var f apierr.Fields
	CheckEntries(&f, nil, "metadata", entries)
	if err := f.Err("METADATA-invalid"); err != nil {
		return nil, err
	}
	pending := make([]eventstore.Pending, len(entries))
	for i, e := range entries {
		//lint:ignore S1016 the payload is a stored event format: it must not follow Entry's fields.
		pending[i] = eventstore.Pending{Type: users.EventMetadataSet, Payload: setPayload{Key: e.Key, Value: e.Value}}
	}
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{Aggregate: u.Aggregate(), Version: u.Version, Events: pending})
	return evs, apierr.FromStore(err, "user")
}

// Remove removes entries of u in one change, expecting u at the version it
// was read. The keys are checked first (their limits were, by the caller:
// see CheckKeys). A key given twice is removed once. When any key is not
// set the result is NotFound naming those keys, and nothing is removed.
func (c *Commands) Remove(ctx context.Context, editor string, u *users.User, keys []string) ([]eventstore.Event, error) {
	var f apierr.Fields
	CheckKeys(&f, nil, "keys", keys)
	if err := f.Err("METADATA-invalid"); err != nil {
		return nil, err
	}
	// Read after u: if an entry changed since, u's version moved on and
	// Push refuses the command, so this check holds when the events land.
	set, err := c.Q.Keys(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	isSet := make(map[string]bool, len(set))
	for _, k := range set {
		isSet[k] = true
	}
	var missing []string
	var pending []eventstore.Pending
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if !isSet[k] {
			missing = append(missing, fmt.Sprintf("%q", k))
			continue
		}
		pending = append(pending, eventstore.Pending{Type: users.EventMetadataRemoved, Payload: removedPayload{Key: k}})
	}
	if len(missing) > 0 {
		return nil, apierr.NotFound("METADATA-not-found", "metadata not found: %s", strings.Join(missing, ", "))
	}
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{Aggregate: u.Aggregate(), Version: u.Version, Events: pending})
	return evs, apierr.FromStore(err, "user")
}
