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

// EventEmailCodeAdded: a code to verify the user's address (ZITADEL's
// name); payload as EventPasswordCodeAdded's.
const EventEmailCodeAdded = "user.human.email.code.added"

// EventInitCodeAdded: an invitation's code, which verifies the address and
// sets the first password in one step (ZITADEL's name).
const EventInitCodeAdded = "user.human.initialization.code.added"

// Kinds of user_codes.
const (
	CodePassword = "password"
	CodeEmail    = "email"
	CodeInit     = "init"
)

// Code lifetimes (ZITADEL's defaults): a reset or an address check an
// hour, an invitation three days.
const (
	PasswordCodeLifetime = time.Hour
	EmailCodeLifetime    = time.Hour
	InitCodeLifetime     = 72 * time.Hour
)

// Login pages (authn's package login) that take a code from a link.
const (
	PathPasswordNew = "/ui/login/password/new"
	PathEmailVerify = "/ui/login/mail/verification"
	PathUserInit    = "/ui/login/user/init"
)

// codeKind is one kind of one-time code: its event, its message and its
// page.
type codeKind struct {
	name, event, mailKind, path string
	lifetime                    time.Duration
	// showCode puts the code itself in the message beside the link, for
	// an API client that asks the user to type it.
	showCode bool
}

var (
	passwordCode = codeKind{CodePassword, EventPasswordCodeAdded, mail.KindPasswordReset, PathPasswordNew, PasswordCodeLifetime, false}
	emailCode    = codeKind{CodeEmail, EventEmailCodeAdded, mail.KindEmailVerification, PathEmailVerify, EmailCodeLifetime, true}
	initCode     = codeKind{CodeInit, EventInitCodeAdded, mail.KindInitialization, PathUserInit, InitCodeLifetime, false}
	codeKinds    = []codeKind{passwordCode, emailCode, initCode}
)

// ErrThrottled refuses a second message of one kind to a user, or to an
// address, within mail.Throttle.
var ErrThrottled = apierr.New(connect.CodeResourceExhausted, "USER-code-throttled",
	"a message of this kind was sent to the user less than a minute ago")

// errBadCode answers a wrong, used, expired or foreign code alike.
var errBadCode = apierr.InvalidArgument("USER-code-invalid", "the verification code is not valid")

type codeAdded struct {
	CodeHash  []byte    `json:"codeHash"`
	Expiry    time.Time `json:"expiry"`
	Recipient string    `json:"recipient,omitempty"`
	// Mail is the sealed message (mail.Sealer), absent when the code was
	// returned to the caller instead.
	Mail []byte `json:"mail,omitempty"`
}

func registerCodes(es *eventstore.Store) {
	for _, k := range codeKinds {
		es.Register(k.event, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			var p codeAdded
			if err := e.Unmarshal(&p); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO user_codes (user_id, kind, code_hash, expires_at, created_at, mailed) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (user_id, kind) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at,
				created_at = excluded.created_at, mailed = excluded.mailed`, e.AggregateID, k.name, p.CodeHash, p.Expiry, e.CreatedAt,
				len(p.Mail) > 0); err != nil {
				return err
			}
			if err := queueMail(ctx, tx, e, k.mailKind, p.Recipient, p.Mail); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		})
	}
}

// queueMail queues a sealed message of e's (none when sealed is empty);
// its id derives from the event, so a message is queued once.
func queueMail(ctx context.Context, tx db.Querier, e eventstore.Event, kind, to string, sealed []byte) error {
	if len(sealed) == 0 {
		return nil
	}
	return mail.Queue(ctx, tx, mail.Pending{ID: fmt.Sprintf("%d.%s", e.Sequence, kind), UserID: e.AggregateID,
		Kind: kind, Recipient: to, Sealed: sealed}, e.CreatedAt)
}

// CodeLink is a link under issuer to the page at path with the user, the
// code and the language of the mail, which the page keeps.
func CodeLink(issuer *url.URL, path, userID, code, lang string) string {
	return strings.TrimSuffix(issuer.String(), "/") + path + "?" +
		url.Values{"userID": {userID}, "code": {code}, "ui_locales": {lang}}.Encode()
}

// CodeMail is how a code goes by mail.
type CodeMail struct {
	Sealer mail.Sealer
	// Data is the message's (language, organization, names); Link,
	// Expires and, where the kind shows it, Code are filled in.
	Data mail.Data
	// Issuer is where the link goes (under it, the kind's page).
	Issuer *url.URL
}

// newCode makes a code of kind k for the user id with address email,
// valid from now: the event that stores it, and, without m, the code.
// With m the code goes by mail (and is not returned); with throttle,
// ErrThrottled when the user or the address got a message of the kind
// within mail.Throttle.
func (c *Commands) newCode(ctx context.Context, k codeKind, id, email string, h Hasher, m *CodeMail, now time.Time, throttle bool) (string, eventstore.Pending, error) {
	code := rand.Text()
	p := codeAdded{CodeHash: h.Hash(code), Expiry: now.Add(k.lifetime).UTC()}
	if m != nil {
		if email == "" {
			return "", eventstore.Pending{}, apierr.Precondition("USER-no-email", "the user has no e-mail address")
		}
		if throttle {
			recent, err := mail.Recent(ctx, c.ES.DB(), id, email, k.mailKind, now)
			if err != nil {
				return "", eventstore.Pending{}, err
			}
			if recent {
				return "", eventstore.Pending{}, ErrThrottled
			}
		}
		var err error
		d := m.Data
		d.Link, d.Expires = CodeLink(m.Issuer, k.path, id, code, d.Lang), p.Expiry
		if k.showCode {
			d.Code = code
		}
		if p.Mail, err = m.Sealer.Seal(id, k.mailKind, d); err != nil {
			return "", eventstore.Pending{}, err
		}
		p.Recipient, code = email, ""
	}
	return code, eventstore.Pending{Type: k.event, Payload: p}, nil
}

// RequestPasswordReset gives u a new password reset code, replacing an
// earlier one, valid for PasswordCodeLifetime. With m it mails the link
// to u's address (ErrThrottled within mail.Throttle of the previous
// message) and returns no code; without, it returns the code.
func (c *Commands) RequestPasswordReset(ctx context.Context, editor string, u *User, h Hasher, m *CodeMail, now time.Time) (string, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return "", nil, err
	}
	if u.State == StateInactive {
		return "", nil, apierr.Precondition("USER-inactive", "the user is deactivated")
	}
	code, ev, err := c.newCode(ctx, passwordCode, u.ID, u.Email, h, m, now, true)
	if err != nil {
		return "", nil, err
	}
	evs, err := c.pushAll(ctx, editor, u, []eventstore.Pending{ev})
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
	_, err := q.checkCode(ctx, u, CodePassword, h, code, now)
	return err
}

// checkCode reports whether code is u's unexpired code of kind, and
// whether it was mailed (rather than returned to whoever asked).
func (q *Queries) checkCode(ctx context.Context, u *User, kind string, h Hasher, code string, now time.Time) (bool, error) {
	var row struct {
		Hash    []byte    `db:"code_hash"`
		Expires time.Time `db:"expires_at"`
		Mailed  bool      `db:"mailed"`
	}
	err := q.DB.Get(ctx, &row, `SELECT code_hash, expires_at, mailed FROM user_codes WHERE user_id = ? AND kind = ?`, u.ID, kind)
	if errors.Is(err, sql.ErrNoRows) {
		return false, errBadCode
	}
	if err != nil {
		return false, err
	}
	if !now.Before(row.Expires) || subtle.ConstantTimeCompare(h.Hash(code), row.Hash) != 1 {
		return false, errBadCode
	}
	return row.Mailed, nil
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
