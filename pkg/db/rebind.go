package db

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// rebindCacheMax bounds the cache of rebound query texts; constant query
// texts number in the hundreds, so reaching it means texts are being built
// dynamically, and those are rebound on every call instead of cached.
const rebindCacheMax = 4096

var (
	rebindCache    sync.Map // query text -> rebound text, PostgreSQL only
	rebindCacheLen atomic.Int64
)

// rebind returns query with placeholders in d's syntax. SQLite takes ? as
// written; PostgreSQL gets $1, $2, … (cached per query text).
func rebind(d Dialect, query string) string {
	if d != Postgres {
		return query
	}
	if v, ok := rebindCache.Load(query); ok {
		return v.(string)
	}
	out := rebindDollar(query)
	if rebindCacheLen.Load() < rebindCacheMax {
		if _, loaded := rebindCache.LoadOrStore(query, out); !loaded {
			rebindCacheLen.Add(1)
		}
	}
	return out
}

// rebindDollar rewrites each ? placeholder to $n. Unlike sqlx.Rebind, it
// leaves ? alone inside 'strings' (including E'…' with backslash escapes),
// "identifiers", -- line comments, /* nested block comments */ and
// $tag$ dollar-quoted bodies $tag$.
func rebindDollar(q string) string {
	if strings.IndexByte(q, '?') < 0 {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); {
		end := i + 1
		switch c := q[i]; {
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i++
			continue
		case c == '\'':
			end = skipQuoted(q, i, '\'', isEscapeString(q, i))
		case c == '"':
			end = skipQuoted(q, i, '"', false)
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			if nl := strings.IndexByte(q[i:], '\n'); nl >= 0 {
				end = i + nl + 1
			} else {
				end = len(q)
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end = skipBlockComment(q, i)
		case c == '$' && (i == 0 || !isIdentByte(q[i-1])):
			end = skipDollarQuoted(q, i)
		}
		b.WriteString(q[i:end])
		i = end
	}
	return b.String()
}

// skipQuoted returns the index just past the literal or identifier opened
// by quote at q[i]; a doubled quote is an escaped quote. An unterminated one
// runs to the end of q.
func skipQuoted(q string, i int, quote byte, backslashEscapes bool) int {
	for j := i + 1; j < len(q); j++ {
		switch q[j] {
		case '\\':
			if backslashEscapes {
				j++
			}
		case quote:
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}

// isEscapeString reports whether the quote at q[i] opens an E'…' string, in
// which backslash escapes a quote.
func isEscapeString(q string, i int) bool {
	if i == 0 || (q[i-1] != 'E' && q[i-1] != 'e') {
		return false
	}
	return i == 1 || !isIdentByte(q[i-2])
}

// skipBlockComment returns the index just past the comment at q[i];
// PostgreSQL block comments nest.
func skipBlockComment(q string, i int) int {
	depth := 0
	for j := i; j+1 < len(q); j++ {
		switch {
		case q[j] == '/' && q[j+1] == '*':
			depth++
			j++
		case q[j] == '*' && q[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(q)
}

// skipDollarQuoted returns the index just past a $tag$…$tag$ string at q[i],
// or i+1 when the $ does not open one (e.g. a $1 parameter).
func skipDollarQuoted(q string, i int) int {
	j := i + 1
	for j < len(q) && isIdentByte(q[j]) && !(j == i+1 && q[j] >= '0' && q[j] <= '9') {
		j++
	}
	if j >= len(q) || q[j] != '$' {
		return i + 1
	}
	tag := q[i : j+1]
	if k := strings.Index(q[j+1:], tag); k >= 0 {
		return j + 1 + k + len(tag)
	}
	return len(q)
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
