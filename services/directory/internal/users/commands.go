package users

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// MaxPasswordLength is the seed's limit (and bcrypt's, for imports).
const MaxPasswordLength = 72

// Commands produces user events.
type Commands struct {
	ES *eventstore.Store
	Q  *Queries
	// Notices, when set, mails change notices: the old address when the
	// address changes, the address when the password does.
	Notices NoticeFunc
	// StepFloor: TOTPGuess refuses codes of this TOTP step and earlier
	// ones (StepFloorAfter; 0 after a clean start).
	StepFloor int64
}

// ValidatePassword checks the seed's 1-72 characters and the organization's
// complexity policy; the error names every unmet rule.
func ValidatePassword(pw string, policy orgs.PasswordPolicy) error {
	n := utf8.RuneCountInString(pw)
	if n == 0 {
		return apierr.InvalidArgument("USER-password-empty", "password is required")
	}
	if n > MaxPasswordLength {
		return apierr.InvalidArgument("USER-password-too-long", "password must have at most %d characters", MaxPasswordLength)
	}
	var f apierr.Fields
	if n < policy.MinLength {
		f.Add("password", "must have at least "+itoa(policy.MinLength)+" characters")
	}
	var upper, lower, digit, symbol bool
	for _, r := range pw {
		switch {
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r):
			lower = true
		case unicode.IsDigit(r):
			digit = true
		default:
			symbol = true
		}
	}
	if policy.HasUppercase && !upper {
		f.Add("password", "must contain an upper-case letter")
	}
	if policy.HasLowercase && !lower {
		f.Add("password", "must contain a lower-case letter")
	}
	if policy.HasNumber && !digit {
		f.Add("password", "must contain a digit")
	}
	if policy.HasSymbol && !symbol {
		f.Add("password", "must contain a symbol")
	}
	return f.Err("USER-password-policy")
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 && n >= 0 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// NewPasswordHash validates pw for user (policy and history) and hashes it.
func (c *Commands) NewPasswordHash(ctx context.Context, userID, pw string, policy orgs.PasswordPolicy) (string, error) {
	if err := ValidatePassword(pw, policy); err != nil {
		return "", err
	}
	if userID != "" && policy.History > 0 {
		hist, err := c.Q.PasswordHistory(ctx, userID, policy.History)
		if err != nil {
			return "", err
		}
		for _, h := range hist {
			ok, _, err := secrets.VerifyPassword(ctx, pw, h)
			if errors.Is(err, secrets.ErrBusy) {
				return "", Busy()
			}
			if ok {
				return "", apierr.InvalidArgument("USER-password-reused", "password must differ from the last %d passwords", policy.History)
			}
		}
	}
	hash, err := secrets.HashPassword(ctx, pw)
	if errors.Is(err, secrets.ErrBusy) {
		return "", Busy()
	}
	return hash, err
}

// Busy is the answer when every password-hashing slot stayed taken: the
// server is overloaded, the client should retry (503 with Retry-After).
func Busy() error {
	return connect.NewError(connect.CodeUnavailable, errors.New("too many password checks at once; retry"))
}

// Rehash stores hash (the same password, current parameters) in place of
// the user's hash after a successful login with an older format: no
// history entry, no change of the password-change flag or date.
func (c *Commands) Rehash(ctx context.Context, u *User, hash string) error {
	_, err := c.ES.Push(ctx, u.ID, eventstore.Command{
		Aggregate: u.Aggregate(),
		Version:   u.Version,
		Events:    []eventstore.Pending{{Type: EventPasswordRehashed, Payload: passwordRehashed{PasswordHash: hash}}},
	})
	return apierr.FromStore(err, "user")
}

// AddHuman creates a human user in org. The payload's PasswordHash must
// already be validated and hashed (or empty: the user starts in state
// initial). It returns the new id and the stored events.
func (c *Commands) AddHuman(ctx context.Context, editor string, org *orgs.Org, p HumanAdded) (string, []eventstore.Event, error) {
	return c.addHuman(ctx, editor, org, p, nil)
}

// AddHumanMailed creates a human user as AddHuman does and, in the same
// push, mails it (with m; nil mails nothing): an invitation when it has no
// password, else a code for an unverified address. With throttle (a
// self-registration) an address that got such a message within
// mail.Throttle gets none (the user can ask again); an admin creating
// users is not throttled.
func (c *Commands) AddHumanMailed(ctx context.Context, editor string, org *orgs.Org, p HumanAdded, h Hasher, m *CodeMail, now time.Time, throttle bool) (string, []eventstore.Event, error) {
	if m == nil || p.Email == "" || (p.PasswordHash != "" && p.EmailVerified) {
		return c.AddHuman(ctx, editor, org, p)
	}
	k := emailCode
	if p.PasswordHash == "" {
		k = initCode
	}
	if throttle {
		recent, err := mail.Recent(ctx, c.ES.DB(), "", p.Email, k.mailKind, now)
		if err != nil {
			return "", nil, err
		}
		if recent {
			return c.AddHuman(ctx, editor, org, p)
		}
	}
	return c.addHuman(ctx, editor, org, p, func(id string) (eventstore.Pending, error) {
		_, ev, err := c.newCode(ctx, k, id, p.Email, h, m, now, false)
		return ev, err
	})
}

func (c *Commands) addHuman(ctx context.Context, editor string, org *orgs.Org, p HumanAdded, more func(id string) (eventstore.Pending, error)) (string, []eventstore.Event, error) {
	email := ""
	if p.EmailVerified {
		email = p.Email
	}
	if err := c.loginNameFree(ctx, org.ID, p.UserName, email); err != nil {
		return "", nil, err
	}
	id := secrets.NewID()
	evs := []eventstore.Pending{{Type: EventHumanAdded, Payload: p}}
	if more != nil {
		ev, err := more(id)
		if err != nil {
			return "", nil, err
		}
		evs = append(evs, ev)
	}
	stored, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: Aggregate, ID: id, ResourceOwner: org.ID},
		Events:    evs,
	})
	return id, stored, apierr.FromStore(err, "user "+p.UserName)
}

// AddMachine creates a machine user in org.
func (c *Commands) AddMachine(ctx context.Context, editor string, org *orgs.Org, p MachineAdded) (string, []eventstore.Event, error) {
	if err := c.loginNameFree(ctx, org.ID, p.UserName, ""); err != nil {
		return "", nil, err
	}
	id := secrets.NewID()
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: Aggregate, ID: id, ResourceOwner: org.ID},
		Events:    []eventstore.Pending{{Type: EventMachineAdded, Payload: p}},
	})
	return id, evs, apierr.FromStore(err, "user "+p.UserName)
}

// SetPassword stores a new password hash; changeRequired forces a change at
// the next login.
// endSessions (an admin's reset) ends the user's sessions and revokes its
// tokens.
// It also removes the links the old password proved (passwordLinks): an
// identity linked by whoever knew it must not outlive the reset.
func (c *Commands) SetPassword(ctx context.Context, editor string, u *User, hash string, changeRequired, endSessions bool) ([]eventstore.Event, error) {
	var evs []eventstore.Pending
	if endSessions {
		var err error
		if evs, err = c.passwordLinks(ctx, u, LinkRemovedByReset); err != nil {
			return nil, err
		}
	}
	p := PasswordChanged{PasswordHash: hash, ChangeRequired: changeRequired, EndSessions: endSessions}
	if u.PasswordHash != "" { // a first password is no change to tell of
		sealed, err := c.notice(ctx, u, mail.KindPasswordChanged, time.Now(), nil)
		if err != nil {
			return nil, err
		}
		if sealed != nil {
			p.NoticeTo, p.Notice = u.Email, sealed
		}
	}
	return c.pushAll(ctx, editor, u, append(evs, eventstore.Pending{Type: EventPasswordChanged, Payload: p}))
}

// loginNameFree refuses (AlreadyExists) a user name that another user of
// the organization signs in with: the same name after normalisation (also
// enforced by a unique index), or, for a name with "@", another user's
// verified e-mail; and a verified e-mail that is another user's name.
// Without this a squatter could make someone's login ambiguous.
func (c *Commands) loginNameFree(ctx context.Context, orgID, userName, verifiedEmail string) error {
	name := NormalizeName(userName)
	var n int
	if err := c.ES.DB().Get(ctx, &n, `SELECT COUNT(*) FROM users WHERE org_id = ? AND user_name_norm = ?`, orgID, name); err != nil {
		return fmt.Errorf("users: check user name: %w", err)
	}
	if n == 0 && strings.Contains(userName, "@") {
		if err := c.ES.DB().Get(ctx, &n, `SELECT COUNT(*) FROM users WHERE org_id = ? AND email_verified = ? AND LOWER(email) = ?`,
			orgID, true, strings.ToLower(userName)); err != nil {
			return fmt.Errorf("users: check user name against e-mails: %w", err)
		}
	}
	if n == 0 && verifiedEmail != "" {
		if err := c.ES.DB().Get(ctx, &n, `SELECT COUNT(*) FROM users WHERE org_id = ? AND user_name_norm = ?`,
			orgID, NormalizeName(verifiedEmail)); err != nil {
			return fmt.Errorf("users: check e-mail against user names: %w", err)
		}
	}
	if n == 0 {
		// A login name is userName@primaryDomain: "bob@acme.example" must
		// not be a user name beside bob's, nor "bob" beside a user named
		// "bob@acme.example" (either way one login name names two users).
		var domain string
		if err := c.ES.DB().Get(ctx, &domain, `SELECT primary_domain FROM orgs WHERE id = ?`, orgID); err != nil {
			return fmt.Errorf("users: primary domain: %w", db.NotFound(err))
		}
		suffix := NormalizeName("@" + domain)
		others := []string{NormalizeName(userName + "@" + domain)}
		if local, ok := strings.CutSuffix(name, suffix); ok && local != "" {
			others = append(others, local)
		}
		for _, o := range others {
			var m int
			if err := c.ES.DB().Get(ctx, &m, `SELECT COUNT(*) FROM users WHERE org_id = ? AND user_name_norm = ?`, orgID, o); err != nil {
				return fmt.Errorf("users: check user name against login names: %w", err)
			}
			n += m
		}
	}
	if n > 0 {
		return apierr.AlreadyExists("USER-name-taken", "user name %s is taken in this organization", userName)
	}
	if verifiedEmail != "" {
		switch taken, err := c.VerifiedEmailTaken(ctx, orgID, verifiedEmail); {
		case err != nil:
			return err
		case taken:
			return apierr.AlreadyExists("USER-email-taken", "the verified e-mail address %s belongs to another user of this organization", verifiedEmail)
		}
	}
	return nil
}

// VerifiedEmailTaken reports whether a user of org has the verified e-mail
// address (case-insensitively). A verified address belongs to one user per
// organization (a unique index, too): a relying party that keys on it
// must find one subject, and a sign-in by e-mail must find its user.
func (c *Commands) VerifiedEmailTaken(ctx context.Context, orgID, email string) (bool, error) {
	var n int
	if err := c.ES.DB().Get(ctx, &n, `SELECT COUNT(*) FROM users WHERE org_id = ? AND email_verified = ? AND LOWER(email) = ?`,
		orgID, true, strings.ToLower(email)); err != nil {
		return false, fmt.Errorf("users: check verified e-mail: %w", err)
	}
	return n > 0, nil
}
