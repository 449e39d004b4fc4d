package management

import (
	"slices"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Helpers of the list RPCs that select in Go (organizations, projects,
// apps, members): there are few of each per caller, and text comparisons
// then follow textquery's Unicode rules on SQLite and PostgreSQL alike.

// criteria are the predicates every listed item must satisfy.
type criteria[T any] []func(T) bool

// checkQueryCount reports more queries than the request's
// repeated.max_items rule allows (20).
func checkQueryCount(f *apierr.Fields, lim *apierr.Limits) {
	f.Check(lim.Count("queries", "queries"))
}

// text adds a text criterion on the value get returns, checking the query
// text (0-200 characters, the string.max_len rule of its query message)
// and method; field names the query, e.g. "queries[0].name_query", name its
// text field.
func (c *criteria[T]) text(f *apierr.Fields, lim *apierr.Limits, field, name, value string, method managementv1.TextQueryMethod, get func(T) string) {
	f.Check(lim.Length(field+"."+name, field+"."+name, value, 0))
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
