package revocation

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SettleTime is how long after it was recorded a revocation is final in
// the feed: longer than a revoking transaction takes, so one that
// committed late with an earlier time is still listed.
const SettleTime = 10 * time.Second

// feedLimit bounds one Feed page.
const feedLimit = 1000

// Entry is one revocation: a token id or a user's cut-off (UserKey).
type Entry struct {
	ID        string    `db:"token_id"`
	ExpiresAt time.Time `db:"expires_at"`
	RevokedAt time.Time `db:"revoked_at"`
}

// Feed returns unexpired revocations recorded after cursor ("" for all), in
// the order recorded, the cursor to resume from (never past a revocation
// younger than SettleTime) and whether more follow. The durable table is
// the source, so it holds whatever Redis has lost.
func (l *List) Feed(ctx context.Context, cursor string) ([]Entry, string, bool, error) {
	at, id, err := parseCursor(cursor)
	if err != nil {
		return nil, "", false, err
	}
	now := l.now()
	var out []Entry
	if err := l.store.Select(ctx, &out, `SELECT token_id, expires_at, revoked_at FROM revoked_tokens
		WHERE (revoked_at > ? OR (revoked_at = ? AND token_id > ?)) AND expires_at > ?
		ORDER BY revoked_at, token_id LIMIT `+strconv.Itoa(feedLimit), at, at, id, now); err != nil {
		return nil, "", false, fmt.Errorf("revocation: read the feed: %w", err)
	}
	settled := now.Add(-SettleTime)
	next := cursor
	for _, e := range out {
		if !e.RevokedAt.Before(settled) {
			break
		}
		next = formatCursor(e.RevokedAt, e.ID)
	}
	return out, next, len(out) == feedLimit, nil
}

// A cursor is "<recorded, Unix µs>:<token id>".
func formatCursor(at time.Time, id string) string {
	return strconv.FormatInt(at.UnixMicro(), 10) + ":" + id
}

func parseCursor(c string) (time.Time, string, error) {
	if c == "" {
		return time.UnixMicro(0).UTC(), "", nil
	}
	us, id, ok := strings.Cut(c, ":")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", fmt.Errorf("%w: malformed cursor", ErrInvalidCursor)
	}
	return time.UnixMicro(n).UTC(), id, nil
}

// ErrInvalidCursor is Feed's error for a cursor it did not make.
var ErrInvalidCursor = fmt.Errorf("revocation: invalid cursor")
