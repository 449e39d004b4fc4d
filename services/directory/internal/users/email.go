package users

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
)

// E-mail events (ZITADEL's names).
const (
	// EventEmailChanged: a new address, unverified.
	EventEmailChanged = "user.human.email.changed"
	// EventEmailVerified: the address is verified; its payload says how.
	EventEmailVerified = "user.human.email.verified"
	// EventInitialized: an invitation's code was used: the address is
	// proven and the first password set (ZITADEL's
	// initialization.check.succeeded).
	EventInitialized = "user.human.initialization.check.succeeded"
)

// Proof says how an address came to be verified, which decides whether
// the email_verified claim believes it (SECURITY.md).
type Proof string

const (
	// ProofCode: the user proved control of the address (a code or link,
	// an invitation).
	ProofCode Proof = "code"
	// ProofIdP: a provider an IAM owner trusts asserted it.
	ProofIdP Proof = "idp"
	// ProofInstance: an IAM owner, or the system at set-up, marked it.
	ProofInstance Proof = "iam"
	// ProofOrg: an organization admin marked it (or a provider only the
	// organization vouches for asserted it). It counts only within a
	// domain the organization verified: an admin of one tenant must not
	// present someone else's address as verified to every app.
	ProofOrg Proof = "org"
)

// proven reports whether the proof holds whatever the address's domain.
func (p Proof) proven() bool { return p == ProofCode || p == ProofIdP || p == ProofInstance }

// emailChanged is the payload of EventEmailChanged.
type emailChanged struct {
	Email string `json:"email"`
	// Notice to the old address, sealed (mail.Sealer); absent when there
	// was none or no mail can be sent.
	NoticeTo string `json:"noticeTo,omitempty"`
	Notice   []byte `json:"notice,omitempty"`
}

// emailVerified is the payload of EventEmailVerified.
type emailVerified struct {
	Proof Proof `json:"proof,omitempty"`
}

// initialized is the payload of EventInitialized; the password and the
// address are events of their own beside it.
type initialized struct{}

// Domain is the lowercased domain of an address ("" without "@").
func Domain(email string) string {
	at := strings.LastIndex(email, "@")
	if at < 0 {
		return ""
	}
	return strings.ToLower(email[at+1:])
}

func registerEmail(es *eventstore.Store) {
	es.Register(EventEmailChanged, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p emailChanged
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET email = ?, email_domain = ?, email_verified = ?, email_proven = ? WHERE id = ?`,
			p.Email, Domain(p.Email), false, false, e.AggregateID); err != nil {
			return err
		}
		// Codes went to the old address: a reset link or an invitation
		// there must not outlive the change (an admin changes an address
		// because the old mailbox is lost or taken).
		for _, k := range codeKinds {
			if err := deleteCodes(ctx, tx, e.AggregateID, k.name); err != nil {
				return err
			}
		}
		if err := queueMail(ctx, tx, e, mail.KindEmailChanged, p.NoticeTo, p.Notice); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventEmailVerified, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p emailVerified
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET email_verified = ?, email_proven = ? WHERE id = ?`,
			true, p.Proof.proven(), e.AggregateID); err != nil {
			return err
		}
		if err := deleteCodes(ctx, tx, e.AggregateID, CodeEmail); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventInitialized, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		if err := deleteCodes(ctx, tx, e.AggregateID, CodeInit); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

// Notice is how a change notice goes by mail: sealed with Sealer, Data
// filled with the change.
type Notice struct {
	Sealer mail.Sealer
	Data   mail.Data
}

// NoticeFunc gives the notice to u, or nil when no mail can be sent.
type NoticeFunc func(ctx context.Context, u *User) (*Notice, error)

// MailData is what a message to u says of it: its organization's name,
// its names, and the first of langs (u's own preference first) messages
// are written in.
func MailData(u *User, org string, langs ...string) mail.Data {
	return mail.Data{Lang: mail.Lang(append([]string{u.PreferredLanguage}, langs...)...), Org: org, Name: u.DisplayName, LoginName: u.LoginName()}
}

// NewUserMailData is MailData for a user not yet created, of org.
func NewUserMailData(p HumanAdded, org, primaryDomain string) mail.Data {
	return MailData(&User{PreferredLanguage: p.PreferredLanguage, DisplayName: p.DisplayName, UserName: p.UserName,
		PrimaryDomain: primaryDomain}, org)
}

// MailNotices is the NoticeFunc that seals notices with sealer, naming the
// user's organization (orgName).
func MailNotices(sealer mail.Sealer, orgName func(ctx context.Context, orgID string) (string, error)) NoticeFunc {
	return func(ctx context.Context, u *User) (*Notice, error) {
		org, err := orgName(ctx, u.OrgID)
		if err != nil {
			return nil, fmt.Errorf("users: notice: %w", err)
		}
		return &Notice{Sealer: sealer, Data: MailData(u, org)}, nil
	}
}

// notice seals the notice of kind to u's address before the change
// (nil without Notices or an address).
func (c *Commands) notice(ctx context.Context, u *User, kind string, now time.Time, fill func(*mail.Data)) ([]byte, error) {
	if c.Notices == nil || u.Email == "" {
		return nil, nil
	}
	n, err := c.Notices(ctx, u)
	if err != nil || n == nil {
		return nil, err
	}
	d := n.Data
	d.When = now.UTC()
	if fill != nil {
		fill(&d)
	}
	return n.Sealer.Seal(u.ID, kind, d)
}

// ChangeEmail gives u the address email. With proof it is verified at once
// (by whom proof says); otherwise it is unverified, and a code to verify it
// goes by m's mail, or, without m, is returned. The old address, if any,
// is told of the change (Notices). An unchanged address is only verified
// (or given a new code).
func (c *Commands) ChangeEmail(ctx context.Context, editor string, u *User, email string, proof Proof, h Hasher, m *CodeMail, now time.Time) (string, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return "", nil, err
	}
	same := email == u.Email
	if same && proof != "" && u.EmailVerified && (u.EmailProven || !proof.proven()) {
		return "", nil, apierr.Precondition("USER-email-unchanged", "the address is already verified")
	}
	if proof != "" {
		if err := c.emailFree(ctx, u, email); err != nil {
			return "", nil, err
		}
	}
	var evs []eventstore.Pending
	if !same {
		p := emailChanged{Email: email}
		sealed, err := c.notice(ctx, u, mail.KindEmailChanged, now, func(d *mail.Data) { d.NewEmail = email })
		if err != nil {
			return "", nil, err
		}
		if sealed != nil {
			p.NoticeTo, p.Notice = u.Email, sealed
		}
		evs = append(evs, eventstore.Pending{Type: EventEmailChanged, Payload: p})
	}
	code := ""
	if proof != "" {
		evs = append(evs, eventstore.Pending{Type: EventEmailVerified, Payload: emailVerified{Proof: proof}})
	} else {
		var ev eventstore.Pending
		var err error
		if code, ev, err = c.newCode(ctx, emailCode, u.ID, email, h, m, now, true); err != nil {
			return "", nil, err
		}
		evs = append(evs, ev)
	}
	out, err := c.pushAll(ctx, editor, u, evs)
	if err != nil {
		return "", nil, err
	}
	return code, out, nil
}

// ResendEmailCode gives u a new code for its unverified address: mailed
// with m, else returned.
func (c *Commands) ResendEmailCode(ctx context.Context, editor string, u *User, h Hasher, m *CodeMail, now time.Time) (string, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return "", nil, err
	}
	if u.Email == "" {
		return "", nil, apierr.Precondition("USER-no-email", "the user has no e-mail address")
	}
	if u.EmailVerified {
		return "", nil, apierr.Precondition("USER-email-verified", "the address is already verified")
	}
	code, ev, err := c.newCode(ctx, emailCode, u.ID, u.Email, h, m, now, true)
	if err != nil {
		return "", nil, err
	}
	evs, err := c.pushAll(ctx, editor, u, []eventstore.Pending{ev})
	if err != nil {
		return "", nil, err
	}
	return code, evs, nil
}

// VerifyEmail verifies u's address with its code (InvalidArgument for a
// wrong, used or expired code; AlreadyExists when another user of the
// organization verified the address meanwhile). A mailed code proves
// control of the address; a code returned to an admin, who handed it on,
// is only that admin's word (ProofOrg).
func (c *Commands) VerifyEmail(ctx context.Context, editor string, u *User, h Hasher, code string, now time.Time) ([]eventstore.Event, error) {
	if err := human(u); err != nil {
		return nil, err
	}
	mailed, err := (&Queries{DB: c.ES.DB()}).checkCode(ctx, u, CodeEmail, h, code, now)
	if err != nil {
		return nil, err
	}
	if err := c.emailFree(ctx, u, u.Email); err != nil {
		return nil, err
	}
	proof := ProofOrg
	if mailed {
		proof = ProofCode
	}
	return c.pushAll(ctx, editor, u, []eventstore.Pending{{Type: EventEmailVerified, Payload: emailVerified{Proof: proof}}})
}

// Invite gives u (waiting for its first password) a new invitation code:
// mailed with m (to email, which first replaces u's address when it
// differs), else returned.
func (c *Commands) Invite(ctx context.Context, editor string, u *User, email string, h Hasher, m *CodeMail, now time.Time) (string, []eventstore.Event, error) {
	if err := human(u); err != nil {
		return "", nil, err
	}
	if u.State != StateInitial {
		return "", nil, apierr.Precondition("USER-not-initial", "the user has already set a password")
	}
	if email == "" {
		email = u.Email
	}
	var evs []eventstore.Pending
	if email != u.Email {
		evs = append(evs, eventstore.Pending{Type: EventEmailChanged, Payload: emailChanged{Email: email}})
	}
	code, ev, err := c.newCode(ctx, initCode, u.ID, email, h, m, now, true)
	if err != nil {
		return "", nil, err
	}
	out, err := c.pushAll(ctx, editor, u, append(evs, ev))
	if err != nil {
		return "", nil, err
	}
	return code, out, nil
}

// CheckEmailCode reports whether code is u's unexpired code for its
// address.
func (q *Queries) CheckEmailCode(ctx context.Context, u *User, h Hasher, code string, now time.Time) error {
	_, err := q.checkCode(ctx, u, CodeEmail, h, code, now)
	return err
}

// CheckInitCode reports whether code is u's unexpired invitation code.
func (q *Queries) CheckInitCode(ctx context.Context, u *User, h Hasher, code string, now time.Time) error {
	_, err := q.initCode(ctx, u, h, code, now)
	return err
}

func (q *Queries) initCode(ctx context.Context, u *User, h Hasher, code string, now time.Time) (bool, error) {
	if u.State != StateInitial {
		return false, errBadCode
	}
	return q.checkCode(ctx, u, CodeInit, h, code, now)
}

// Initialize takes an invitation: with its code it sets u's first
// password (hash, under the policy) and, when the code was mailed, proves
// u's address, in one push.
func (c *Commands) Initialize(ctx context.Context, u *User, h Hasher, code, hash string, now time.Time) ([]eventstore.Event, error) {
	mailed, err := (&Queries{DB: c.ES.DB()}).initCode(ctx, u, h, code, now)
	if err != nil {
		return nil, err
	}
	evs := []eventstore.Pending{{Type: EventInitialized, Payload: initialized{}}}
	if mailed && u.Email != "" && !u.EmailVerified {
		if err := c.emailFree(ctx, u, u.Email); err == nil {
			evs = append(evs, eventstore.Pending{Type: EventEmailVerified, Payload: emailVerified{Proof: ProofCode}})
		} else if !isAlreadyExists(err) {
			return nil, err
		}
		// An address another user verified meanwhile stays unverified
		// here; the password is still set.
	}
	evs = append(evs, eventstore.Pending{Type: EventPasswordChanged, Payload: PasswordChanged{PasswordHash: hash}})
	return c.pushAll(ctx, u.ID, u, evs)
}

func isAlreadyExists(err error) bool { return connect.CodeOf(err) == connect.CodeAlreadyExists }

// emailFree refuses (AlreadyExists) to verify email for u when another user
// of the organization has it verified, or signs in with it as user name.
func (c *Commands) emailFree(ctx context.Context, u *User, email string) error {
	var n int
	if err := c.ES.DB().Get(ctx, &n, `SELECT COUNT(*) FROM users WHERE org_id = ? AND id <> ?
		AND ((email_verified = ? AND LOWER(email) = ?) OR user_name_norm = ?)`,
		u.OrgID, u.ID, true, strings.ToLower(email), NormalizeName(email)); err != nil {
		return fmt.Errorf("users: check verified e-mail: %w", err)
	}
	if n > 0 {
		return apierr.AlreadyExists("USER-email-taken", "the verified e-mail address %s belongs to another user of this organization", email)
	}
	return nil
}
