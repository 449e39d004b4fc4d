package management

import (
	"fmt"
	"slices"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Helpers of the list RPCs that select in Go (organizations, projects,
// apps, members): there are few of each per caller, and text comparisons
// then follow textquery's Unicode rules on SQLite and PostgreSQL alike.

// Limits of their queries.
const (
	maxListQueries = 20
	maxQueryText   = 200
)

// criteria are the predicates every listed item must satisfy.
type criteria[T any] []func(T) bool

// checkQueryCount refuses more than maxListQueries queries.
func checkQueryCount(f *apierr.Fields, n int) {
	if n > maxListQueries {
		f.Add("queries", fmt.Sprintf("must have at most %d entries", maxListQueries))
	}
}

// text adds a text criterion on the value get returns, checking the query
// text (0-200 characters) and method; field names the query, e.g.
// "queries[0].name_query", name its text field.
func (c *criteria[T]) text(f *apierr.Fields, field, name, value string, method managementv1.TextQueryMethod, get func(T) string) {
	f.Check(apierr.Length(field+"."+name, value, 0, maxQueryText))
	m := textquery.Method(method)
	if !m.Valid() {
		f.Add(field+".method", "is not a defined value")
	}
	*c = append(*c, func(x T) bool { return m.Match(get(x), value) })
}

// page returns the page p of the items matching every criterion, sorted
// by cmp (descending unless p.Asc), and how many match in total.
func (c criteria[T]) page(items []T, cmp func(a, b T) int, p users.Page) ([]T, uint64) {
	matched := slices.DeleteFunc(items, func(x T) bool {
		for _, ok := range c {
			if !ok(x) {
				return true
			}
		}
		return false
	})
	slices.SortFunc(matched, func(a, b T) int {
		if p.Asc {
			return cmp(a, b)
		}
		return -cmp(a, b)
	})
	total := uint64(len(matched))
	if p.Offset >= total {
		return nil, total
	}
	out := matched[p.Offset:]
	if uint64(len(out)) > p.Limit {
		out = out[:p.Limit]
	}
	return out, total
}
