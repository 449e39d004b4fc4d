package metadata

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/db"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

// Queries reads the user_metadata projection.
type Queries struct{ DB *db.DB }

const columns = `user_id, key, value, org_id, creation_date, change_date, sequence`

// Get returns one entry of a user, or an error wrapping db.ErrNotFound.
func (q *Queries) Get(ctx context.Context, userID, key string) (*Metadata, error) {
	var m Metadata
	if err := q.DB.Get(ctx, &m, `SELECT `+columns+` FROM user_metadata WHERE user_id = ? AND key = ?`, userID, key); err != nil {
		return nil, fmt.Errorf("metadata %q: %w", key, db.NotFound(err))
	}
	return &m, nil
}

// Keys returns the keys set on a user, in no particular order.
func (q *Queries) Keys(ctx context.Context, userID string) ([]string, error) {
	var keys []string
	if err := q.DB.Select(ctx, &keys, `SELECT key FROM user_metadata WHERE user_id = ?`, userID); err != nil {
		return nil, fmt.Errorf("metadata keys: %w", err)
	}
	return keys, nil
}

// KeyQuery matches keys against Text with Method.
type KeyQuery struct {
	Text   string
	Method textquery.Method
}

// ListOptions select, order and page a user's entries.
type ListOptions struct {
	Queries []KeyQuery // all must match
	Asc     bool       // by key, byte-wise; descending when false
	Offset  uint64
	Limit   int // > 0
}

// List returns one page of a user's entries matching every query, and how
// many match in all.
//
// Keys are filtered and ordered here rather than in SQL so that both
// dialects answer alike: SQLite's LIKE and lower() fold ASCII only, and
// PostgreSQL orders by the database's collation. Only keys (at most 200
// characters each) are read for that; values are read for the page alone.
func (q *Queries) List(ctx context.Context, userID string, o ListOptions) ([]Metadata, uint64, error) {
	keys, err := q.Keys(ctx, userID)
	if err != nil {
		return nil, 0, err
	}
	keys = slices.DeleteFunc(keys, func(k string) bool {
		for _, kq := range o.Queries {
			if !kq.Method.Match(k, kq.Text) {
				return true
			}
		}
		return false
	})
	slices.Sort(keys)
	if !o.Asc {
		slices.Reverse(keys)
	}
	total := uint64(len(keys))
	if o.Offset >= total || o.Limit <= 0 {
		return nil, total, nil
	}
	page := keys[o.Offset:]
	if len(page) > o.Limit {
		page = page[:o.Limit]
	}
	args := make([]any, 0, len(page)+1)
	args = append(args, userID)
	for _, k := range page {
		args = append(args, k)
	}
	var rows []Metadata
	if err := q.DB.Select(ctx, &rows, `SELECT `+columns+` FROM user_metadata WHERE user_id = ? AND key IN (?`+
		strings.Repeat(", ?", len(page)-1)+`)`, args...); err != nil {
		return nil, 0, fmt.Errorf("metadata page: %w", err)
	}
	// Back into the page's order; an entry removed between the two reads
	// is left out.
	byKey := make(map[string]Metadata, len(rows))
	for _, r := range rows {
		byKey[r.Key] = r
	}
	out := make([]Metadata, 0, len(page))
	for _, k := range page {
		if r, ok := byKey[k]; ok {
			out = append(out, r)
		}
	}
	return out, total, nil
}
