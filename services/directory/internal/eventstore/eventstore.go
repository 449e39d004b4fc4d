package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
)

// Errors Push returns (wrapped).
var (
	// ErrConcurrent: another write changed the aggregate since it was read.
	ErrConcurrent = errors.New("eventstore: aggregate changed concurrently")
	// ErrUnique: a reducer hit a uniqueness constraint of a projection
	// (a name, client id or domain already taken).
	ErrUnique = errors.New("eventstore: unique constraint")
)

// Aggregate identifies the object a command changes.
type Aggregate struct {
	Type          string // "org", "user", "idp", "project", "instance"
	ID            string
	ResourceOwner string // organization id ("" for the instance)
}

// Pending is an event to append.
type Pending struct {
	Type    string
	Payload any // marshalled to JSON
}

// Command appends events to one aggregate, expecting it at Version (the
// number of events it has; 0 for a new aggregate).
type Command struct {
	Aggregate Aggregate
	Version   uint64
	Events    []Pending
}

// Event is a stored event.
type Event struct {
	Sequence      uint64          `db:"sequence"`
	AggregateType string          `db:"aggregate_type"`
	AggregateID   string          `db:"aggregate_id"`
	Version       uint64          `db:"aggregate_version"`
	Type          string          `db:"event_type"`
	Payload       json.RawMessage `db:"payload"`
	ResourceOwner string          `db:"resource_owner"`
	Editor        string          `db:"editor"`
	CreatedAt     time.Time       `db:"created_at"`
}

// Unmarshal decodes the payload into v.
func (e Event) Unmarshal(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("eventstore: decode %s payload: %w", e.Type, err)
	}
	return nil
}

// Reducer updates projections for one event inside Push's transaction.
type Reducer func(ctx context.Context, tx db.Querier, e Event) error

// Store appends events and runs reducers.
type Store struct {
	db       *db.DB
	reducers map[string]Reducer
	now      func() time.Time
}

// New returns a store over d. Reducers are registered by event type; an
// event type without a reducer is an error at Push, so no event can be
// stored without its projection.
func New(d *db.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: d, reducers: map[string]Reducer{}, now: now}
}

// Register adds the reducer for an event type; registering twice panics
// (a programming error found at start).
func (s *Store) Register(eventType string, r Reducer) {
	if _, dup := s.reducers[eventType]; dup {
		panic("eventstore: duplicate reducer for " + eventType)
	}
	s.reducers[eventType] = r
}

// DB is the underlying database, for projection queries.
func (s *Store) DB() *db.DB { return s.db }

// Push appends every command's events in one transaction, with one
// timestamp, and reduces them. It returns the stored events in order.
func (s *Store) Push(ctx context.Context, editor string, cmds ...Command) ([]Event, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	var out []Event
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		out = out[:0]
		for _, c := range cmds {
			var current uint64
			if err := tx.Get(ctx, &current,
				`SELECT COALESCE(MAX(aggregate_version), 0) FROM events WHERE aggregate_id = ?`, c.Aggregate.ID); err != nil {
				return fmt.Errorf("eventstore: read version: %w", err)
			}
			if current != c.Version {
				return fmt.Errorf("%w: %s %s is at version %d, not %d", ErrConcurrent, c.Aggregate.Type, c.Aggregate.ID, current, c.Version)
			}
			for i, p := range c.Events {
				reduce, ok := s.reducers[p.Type]
				if !ok {
					return fmt.Errorf("eventstore: no reducer for event type %q", p.Type)
				}
				payload, err := json.Marshal(p.Payload)
				if err != nil {
					return fmt.Errorf("eventstore: encode %s payload: %w", p.Type, err)
				}
				e := Event{
					AggregateType: c.Aggregate.Type,
					AggregateID:   c.Aggregate.ID,
					Version:       c.Version + uint64(i) + 1,
					Type:          p.Type,
					Payload:       payload,
					ResourceOwner: c.Aggregate.ResourceOwner,
					Editor:        editor,
					CreatedAt:     now,
				}
				err = tx.Get(ctx, &e.Sequence, `INSERT INTO events
					(aggregate_type, aggregate_id, aggregate_version, event_type, payload, resource_owner, editor, created_at)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING sequence`,
					e.AggregateType, e.AggregateID, e.Version, e.Type, string(e.Payload), e.ResourceOwner, e.Editor, e.CreatedAt)
				if db.IsUniqueViolation(err) {
					// A concurrent writer appended the same version first.
					return fmt.Errorf("%w: %s %s version %d", ErrConcurrent, c.Aggregate.Type, c.Aggregate.ID, e.Version)
				}
				if err != nil {
					return fmt.Errorf("eventstore: append %s: %w", e.Type, err)
				}
				if err := reduce(ctx, tx, e); err != nil {
					if db.IsUniqueViolation(err) {
						return fmt.Errorf("%w: %s: %v", ErrUnique, e.Type, err)
					}
					return fmt.Errorf("eventstore: reduce %s: %w", e.Type, err)
				}
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Filter selects events for Events.
type Filter struct {
	AggregateID   string
	ResourceOwner string
	AfterSequence uint64
	Limit         int
}

// Events reads stored events in sequence order (the audit log; also used by
// tests to check details against the event table).
func (s *Store) Events(ctx context.Context, f Filter) ([]Event, error) {
	q := `SELECT sequence, aggregate_type, aggregate_id, aggregate_version, event_type, payload, resource_owner, editor, created_at
		FROM events WHERE sequence > ?`
	args := []any{f.AfterSequence}
	if f.AggregateID != "" {
		q += ` AND aggregate_id = ?`
		args = append(args, f.AggregateID)
	}
	if f.ResourceOwner != "" {
		q += ` AND resource_owner = ?`
		args = append(args, f.ResourceOwner)
	}
	q += ` ORDER BY sequence`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	var rows []struct {
		Event
		Payload string `db:"payload"`
	}
	if err := s.db.Select(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("eventstore: read events: %w", err)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = r.Event
		out[i].Payload = json.RawMessage(r.Payload)
	}
	return out, nil
}

// LastOfType returns the sequence and time of the last event of any
// aggregate of the given type: what a list read from that type's
// projections has processed. Zero values when there is none.
func (s *Store) LastOfType(ctx context.Context, aggregateType string) (uint64, time.Time, error) {
	var last []struct {
		Sequence  uint64    `db:"sequence"`
		CreatedAt time.Time `db:"created_at"`
	}
	if err := s.db.Select(ctx, &last, `SELECT sequence, created_at FROM events WHERE aggregate_type = ?
		ORDER BY sequence DESC LIMIT 1`, aggregateType); err != nil {
		return 0, time.Time{}, fmt.Errorf("eventstore: last %s event: %w", aggregateType, err)
	}
	if len(last) == 0 {
		return 0, time.Time{}, nil
	}
	return last[0].Sequence, last[0].CreatedAt, nil
}

// Change is an event's sequence and owner, for other services' caches.
type Change struct {
	Sequence      uint64    `db:"sequence"`
	AggregateType string    `db:"aggregate_type"`
	AggregateID   string    `db:"aggregate_id"`
	EventType     string    `db:"event_type"`
	ResourceOwner string    `db:"resource_owner"`
	CreatedAt     time.Time `db:"created_at"`
}

// Changes returns at most limit changes after sequence after, in order,
// and the cursor: the highest sequence up to which every change is older
// than settled (created before it) and so final — a transaction that took
// a lower sequence commits within that time or not at all. after 0 starts
// at the newest settled change.
func (s *Store) Changes(ctx context.Context, after uint64, settled time.Time, limit int) ([]Change, uint64, error) {
	if after == 0 {
		var head []uint64
		if err := s.db.Select(ctx, &head, `SELECT sequence FROM events WHERE created_at < ? ORDER BY sequence DESC LIMIT 1`, settled); err != nil {
			return nil, 0, fmt.Errorf("eventstore: newest settled change: %w", err)
		}
		if len(head) == 1 {
			after = head[0]
		}
	}
	var out []Change
	if err := s.db.Select(ctx, &out, `SELECT sequence, aggregate_type, aggregate_id, event_type, resource_owner, created_at FROM events WHERE sequence > ? ORDER BY sequence LIMIT `+strconv.Itoa(limit), after); err != nil {
		return nil, 0, fmt.Errorf("eventstore: read changes: %w", err)
	}
	cursor := after
	for _, c := range out {
		if !c.CreatedAt.Before(settled) {
			break
		}
		cursor = c.Sequence
	}
	return out, cursor, nil
}
