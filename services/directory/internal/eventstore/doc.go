// Package eventstore is the directory's data of record: an append-only table
// of events with a global sequence, plus the reducers that keep the
// projections (read models) current. Push appends the events of one or more
// aggregates and runs their reducers in one transaction, so a write is
// readable by the next request; a unique (aggregate_id, aggregate_version)
// makes a concurrent write to the same aggregate fail with ErrConcurrent.
// It depends only on pkg/db.
package eventstore
