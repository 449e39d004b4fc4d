package metadata

import "github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"

// Register adds this package's reducers to es.
func Register(es *eventstore.Store) {
	_ = es
}
