package idps

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

// Queries reads the idps projection.
type Queries struct{ DB *db.DB }

const columns = `id, org_id, name, styling_type, state, client_id, client_secret, issuer, scopes,
	display_name_mapping, username_mapping, auto_register, trust_amr, creation_date, change_date, sequence, version`

// Get returns an IdP of org, or db.ErrNotFound (also for another
// organization's IdP: callers must not learn it exists).
func (q *Queries) Get(ctx context.Context, orgID, id string) (*IDP, error) {
	var p IDP
	if err := q.DB.Get(ctx, &p, `SELECT `+columns+` FROM idps WHERE id = ? AND org_id = ?`, id, orgID); err != nil {
		return nil, fmt.Errorf("idp %s: %w", id, db.NotFound(err))
	}
	return &p, nil
}

// NameQuery matches IdP names.
type NameQuery struct {
	Name   string
	Method textquery.Method
}

// Search selects a page of an organization's IdPs; every criterion must
// match. Results are ordered by name (then id), descending unless Asc.
type Search struct {
	IDs        []string // each must equal the IdP's id
	Names      []NameQuery
	OwnerTypes []int32 // each must equal the owner type (always OwnerOrg here)
	Offset     uint64
	Limit      int
	Asc        bool
}

func (s *Search) match(p *IDP) bool {
	for _, id := range s.IDs {
		if p.ID != id {
			return false
		}
	}
	for _, n := range s.Names {
		if !n.Method.Match(p.Name, n.Name) {
			return false
		}
	}
	for _, o := range s.OwnerTypes {
		if o != OwnerOrg {
			return false
		}
	}
	return true
}

// Search returns the page of org's IdPs selected by s and the number of
// IdPs matching in total. An organization has few IdPs (each is a button on
// its login page), so criteria are applied here rather than in SQL: text
// comparisons then follow the same Unicode rules on SQLite and PostgreSQL,
// whose LOWER and LIKE differ.
func (q *Queries) Search(ctx context.Context, orgID string, s Search) ([]*IDP, uint64, error) {
	var all []*IDP
	if err := q.DB.Select(ctx, &all, `SELECT `+columns+` FROM idps WHERE org_id = ?`, orgID); err != nil {
		return nil, 0, fmt.Errorf("list idps: %w", err)
	}
	matched := slices.DeleteFunc(all, func(p *IDP) bool { return !s.match(p) })
	slices.SortFunc(matched, func(a, b *IDP) int {
		c := cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
		if s.Asc {
			return c
		}
		return -c
	})
	total := uint64(len(matched))
	if s.Offset >= total {
		return nil, total, nil
	}
	page := matched[s.Offset:]
	if s.Limit > 0 && len(page) > s.Limit {
		page = page[:s.Limit]
	}
	return page, total, nil
}

// Processed returns the sequence and time of the last event reduced into
// the idps projection (the last event of any IdP aggregate, removals
// included); zero values when there is none.
func (q *Queries) Processed(ctx context.Context) (uint64, time.Time, error) {
	var last []struct {
		Sequence  uint64    `db:"sequence"`
		CreatedAt time.Time `db:"created_at"`
	}
	if err := q.DB.Select(ctx, &last, `SELECT sequence, created_at FROM events WHERE aggregate_type = ?
		ORDER BY sequence DESC LIMIT 1`, Aggregate); err != nil {
		return 0, time.Time{}, fmt.Errorf("idps: processed sequence: %w", err)
	}
	if len(last) == 0 {
		return 0, time.Time{}, nil
	}
	return last[0].Sequence, last[0].CreatedAt, nil
}
