package users

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
)

// EventPasswordCodeAdded: a password reset was asked for (ZITADEL's event
// name). Its payload holds the code's keyed hash, never the code; when the
// code goes by mail, the message's data sealed with the master key.
const EventPasswordCodeAdded = "user.human.password.code.added"

// Kinds of user_codes.
const CodePassword = "password"

// PasswordCodeLifetime is how long a reset code works.
const PasswordCodeLifetime = time.Hour

// ErrThrottled refuses a second message of one kind to a user within
// mail.Throttle.
var ErrThrottled = apierr.New(connect.CodeResourceExhausted, "USER-code-throttled",
	"a message of this kind was sent to the user less than a minute ago")

// errBadResetCode answers a wrong, used, expired or foreign code alike.
var errBadResetCode = apierr.InvalidArgument("USER-code-invalid", "the verification code is not valid")

type codeAdded struct {
	CodeHash  []byte    `json:"codeHash"`
	Expiry    time.Time `json:"expiry"`
	Recipient string    `json:"recipient,omitempty"`
	// Mail is the sealed message (mail.Sealer), absent when the code was
	// returned to the caller instead.
	Mail []byte `json:"mail,omitempty"`
}

func registerCodes(es *eventstore.Store) {
	es.Register(EventPasswordCodeAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p codeAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO user_codes (user_id, kind, code_hash, expires_at, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (user_id, kind) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at,
				created_at = excluded.created_at`, e.AggregateID, CodePassword, p.CodeHash, p.Expiry, e.CreatedAt); err != nil {
			return err
		}
		if len(p.Mail) > 0 {
			if err := mail.Queue(ctx, tx, mail.Pending{ID: fmt.Sprintf("%d.%s", e.Sequence, mail.KindPasswordReset), UserID: e.AggregateID,
				Kind: mail.KindPasswordReset, Recipient: p.Recipient, Sealed: p.Mail}, e.CreatedAt); err != nil {
				return err
			}
		}
		return touch(ctx, tx, e)
	})
}

// PathPasswordNew is the login page a reset link opens (authn's package
// login).
const PathPasswordNew = "/ui/login/password/new"

// ResetLink is a password reset link under issuer: the page, the user,
// the code and the language of the mail, which the page keeps.
func ResetLink(issuer *url.URL, userID, code, lang string) string {
	return strings.TrimSuffix(issuer.String(), "/") + PathPasswordNew + "?" +
		url.Values{"userID": {userID}, "code": {code}, "ui_locales": {lang}}.Encode()
}

// ResetMail is how a reset code goes by mail.
type ResetMail struct {
	Sealer mail.Sealer
	// Data is the message's (language, organization, names); Link and
	// Expires are filled in.
	Data mail.Data
	// Link is the page that takes the code.
	Link func(code string) string
}

// RequestPasswordReset gives u a new password reset code, replacing an
// earlier one, valid for PasswordCodeLifetime. With m it mails the link
// to u's address (ErrThrottled within mail.Throttle of the previous
// message) and returns no code; without, it returns the code.
func (c *Commands) RequestPasswordReset(ctx context.Context, editor string, u *User, h Hasher, m *ResetMail, now time.Time) (string, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return "", nil, err
	}
	if u.State == StateInactive {
		return "", nil, apierr.Precondition("USER-inactive", "the user is deactivated")
	}
	code := rand.Text()
	p := codeAdded{CodeHash: h.Hash(code), Expiry: now.Add(PasswordCodeLifetime).UTC()}
	if m != nil {
		if u.Email == "" {
			return "", nil, apierr.Precondition("USER-no-email", "the user has no e-mail address")
		}
		recent, err := mail.Recent(ctx, c.ES.DB(), u.ID, mail.KindPasswordReset, now)
		if err != nil {
			return "", nil, err
		}
		if recent {
			return "", nil, ErrThrottled
		}
		d := m.Data
		d.Link, d.Expires = m.Link(code), p.Expiry
		if p.Mail, err = m.Sealer.Seal(u.ID, mail.KindPasswordReset, d); err != nil {
			return "", nil, err
		}
		p.Recipient, code = u.Email, ""
	}
	evs, err := c.push(ctx, editor, u, EventPasswordCodeAdded, p)
	if err != nil {
		return "", nil, err
	}
	return code, evs, nil
}

// CheckPasswordCode reports whether code is u's unexpired password reset
// code; a wrong, used or expired code is InvalidArgument, one answer for
// all. The password change that follows deletes it (every change of the
// password does: an earlier code dies with the password it was for).
func (q *Queries) CheckPasswordCode(ctx context.Context, u *User, h Hasher, code string, now time.Time) error {
	var row struct {
		Hash    []byte    `db:"code_hash"`
		Expires time.Time `db:"expires_at"`
	}
	err := q.DB.Get(ctx, &row, `SELECT code_hash, expires_at FROM user_codes WHERE user_id = ? AND kind = ?`, u.ID, CodePassword)
	if errors.Is(err, sql.ErrNoRows) {
		return errBadResetCode
	}
	if err != nil {
		return err
	}
	if !now.Before(row.Expires) || subtle.ConstantTimeCompare(h.Hash(code), row.Hash) != 1 {
		return errBadResetCode
	}
	return nil
}

// deleteCodes forgets u's codes of kind (in a password change's
// transaction).
func deleteCodes(ctx context.Context, tx db.Querier, userID, kind string) error {
	_, err := tx.Exec(ctx, `DELETE FROM user_codes WHERE user_id = ? AND kind = ?`, userID, kind)
	return err
}

// codePruneSteps delete expired codes.
func codePruneSteps() []db.PruneStep {
	return []db.PruneStep{{
		Table: "user_codes",
		Query: `DELETE FROM user_codes WHERE (user_id, kind) IN (SELECT user_id, kind FROM user_codes
			WHERE expires_at < ? LIMIT ` + db.Batch + `)`,
		Args: func(now time.Time) []any { return []any{now} },
	}}
}
