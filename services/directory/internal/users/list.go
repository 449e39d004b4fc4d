package users

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehouse-id/gatehouse/pkg/db"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

// Page selects a slice of an ordered list.
type Page struct {
	Offset uint64
	Limit  uint64
	Asc    bool // ascending; descending otherwise (the API's default)
}

func (p Page) direction() string {
	if p.Asc {
		return "ASC"
	}
	return "DESC"
}

// QueryField is what a Query matches.
type QueryField int

// Query fields.
const (
	QueryUserName  QueryField = iota + 1
	QueryEmail                // e-mail of human users
	QueryLoginName            // userName@primaryDomain
	QueryState
	QueryType
)

// Query is one criterion of Search; text fields use Text and Method, state
// and type use Value.
type Query struct {
	Field  QueryField
	Text   string
	Method textquery.Method
	Value  int32
}

// SortColumn is what Search orders by (the management API's UserFieldName
// numbers); SortDefault is the user name.
type SortColumn int32

// Sort columns.
const (
	SortDefault SortColumn = iota
	SortUserName
	SortFirstName
	SortLastName
	SortNickName
	SortDisplayName
	SortEmail
	SortState
	SortType
	SortCreationDate
)

var sortColumns = map[SortColumn]struct {
	col  string
	text bool
}{
	SortDefault: {"u.user_name", true}, SortUserName: {"u.user_name", true}, SortFirstName: {"u.first_name", true},
	SortLastName: {"u.last_name", true}, SortNickName: {"u.nick_name", true}, SortDisplayName: {"u.display_name", true},
	SortEmail: {"u.email", true}, SortState: {"u.state", false}, SortType: {"u.type", false},
	SortCreationDate: {"u.creation_date", false},
}

// ValidSort reports whether s is a known sort column.
func ValidSort(s SortColumn) bool { _, ok := sortColumns[s]; return ok }

// Search selects users of one organization: every query must match.
type Search struct {
	OrgID   string
	Queries []Query
	Sort    SortColumn
	Page    Page
}

// Search returns one page of the organization's matching users and the
// number of all matching users.
func (q *Queries) Search(ctx context.Context, s Search) ([]User, uint64, error) {
	col, ok := sortColumns[s.Sort]
	if !ok {
		return nil, 0, fmt.Errorf("users: unknown sort column %d", s.Sort)
	}
	where := []string{"u.org_id = ?"}
	args := []any{s.OrgID}
	for _, qu := range s.Queries {
		cond, a, err := condition(q.DB.Dialect(), qu)
		if err != nil {
			return nil, 0, err
		}
		where = append(where, "("+cond+")")
		args = append(args, a...)
	}
	w := ` WHERE ` + strings.Join(where, " AND ")
	var total uint64
	if err := q.DB.Get(ctx, &total, `SELECT COUNT(*)`+From+w, args...); err != nil {
		return nil, 0, fmt.Errorf("users: count: %w", err)
	}
	order := col.col
	if col.text {
		order += collate(q.DB.Dialect())
	}
	dir := s.Page.direction()
	out := []User{}
	err := q.DB.Select(ctx, &out, `SELECT `+Columns+From+w+` ORDER BY `+order+` `+dir+`, u.id `+dir+` LIMIT ? OFFSET ?`,
		append(args, int64(s.Page.Limit), int64(s.Page.Offset))...)
	if err != nil {
		return nil, 0, fmt.Errorf("users: search: %w", err)
	}
	return out, total, nil
}

// collate makes text order bytewise on PostgreSQL, as SQLite's default
// BINARY collation is, so both dialects sort alike.
func collate(d db.Dialect) string {
	if d == db.Postgres {
		return ` COLLATE "C"`
	}
	return ""
}

func condition(d db.Dialect, qu Query) (string, []any, error) {
	switch qu.Field {
	case QueryUserName:
		return textCondition(d, "u.user_name", qu.Method, qu.Text)
	case QueryEmail:
		c, a, err := textCondition(d, "u.email", qu.Method, qu.Text)
		return "u.type = ? AND " + c, append([]any{TypeHuman}, a...), err
	case QueryLoginName:
		return textCondition(d, "(u.user_name || '@' || o.primary_domain)", qu.Method, qu.Text)
	case QueryState:
		return "u.state = ?", []any{qu.Value}, nil
	case QueryType:
		return "u.type = ?", []any{qu.Value}, nil
	}
	return "", nil, fmt.Errorf("users: unknown query field %d", qu.Field)
}

// textCondition compares col with value. Plain SQL functions rather than
// LIKE, whose case sensitivity differs between the dialects and whose
// wildcards would need escaping. Ignoring case lower-cases both sides in
// SQL (SQLite folds ASCII letters only).
func textCondition(d db.Dialect, col string, m textquery.Method, value string) (string, []any, error) {
	param := "CAST(? AS TEXT)"
	switch m {
	case textquery.EqualsIgnoreCase, textquery.StartsWithIgnoreCase, textquery.ContainsIgnoreCase, textquery.EndsWithIgnoreCase:
		col, param = "LOWER("+col+")", "LOWER("+param+")"
	}
	n := utf8.RuneCountInString(value)
	switch m {
	case textquery.Equals, textquery.EqualsIgnoreCase:
		return col + " = " + param, []any{value}, nil
	case textquery.StartsWith, textquery.StartsWithIgnoreCase:
		return "SUBSTR(" + col + ", 1, ?) = " + param, []any{n, value}, nil
	case textquery.EndsWith, textquery.EndsWithIgnoreCase:
		return "LENGTH(" + col + ") >= ? AND SUBSTR(" + col + ", LENGTH(" + col + ") - ? + 1) = " + param, []any{n, n, value}, nil
	case textquery.Contains, textquery.ContainsIgnoreCase:
		if d == db.Postgres {
			return "STRPOS(" + col + ", " + param + ") > 0", []any{value}, nil
		}
		return "INSTR(" + col + ", " + param + ") > 0", []any{value}, nil
	}
	return "", nil, fmt.Errorf("users: unknown text method %d", m)
}

// Processed returns the sequence and time of the last event reduced into
// the user projections (users, machine_keys): the last event of any user
// aggregate, removals included. Zero values on an empty store.
func (q *Queries) Processed(ctx context.Context) (uint64, time.Time, error) {
	var last []struct {
		Sequence  uint64    `db:"sequence"`
		CreatedAt time.Time `db:"created_at"`
	}
	if err := q.DB.Select(ctx, &last, `SELECT sequence, created_at FROM events WHERE aggregate_type = ?
		ORDER BY sequence DESC LIMIT 1`, Aggregate); err != nil {
		return 0, time.Time{}, fmt.Errorf("users: processed sequence: %w", err)
	}
	if len(last) == 0 {
		return 0, time.Time{}, nil
	}
	return last[0].Sequence, last[0].CreatedAt, nil
}
