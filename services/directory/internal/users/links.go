package users

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// Links of users to external identities: a user signs in through an
// identity provider of its organization when the subject the IdP asserts
// is linked to it. Links are events of the user aggregate, reduced into
// user_links; removing the user (EventRemoved) or the IdP removes them.
const (
	EventIdPLinkAdded   = "user.idp.link.added"
	EventIdPLinkRemoved = "user.idp.link.removed"
)

// MaxExternalSubjectLength is the longest subject an IdP may assert: OpenID
// Connect Core 1.0 §2, "sub ... MUST NOT exceed 255 ASCII characters".
const MaxExternalSubjectLength = 255

// IdPLink is the payload of EventIdPLinkAdded and EventIdPLinkRemoved.
type IdPLink struct {
	IdPID           string `json:"idpId"`
	ExternalSubject string `json:"externalSubject"`
	// ExternalUserName is the user name the IdP gave (added events only).
	ExternalUserName string `json:"externalUserName,omitempty"`
	// Issuer and ClientID name the provider as it was when linked (added
	// events only): a repointed provider never inherits the link.
	Issuer   string `json:"issuer,omitempty"`
	ClientID string `json:"clientId,omitempty"`
	// Registered: the link came with the user, registered through the
	// provider (added events only). Any other link was made by proving
	// the user's password, and an admin's reset or a deactivation
	// removes it (Reason says so on the removed event).
	Registered bool   `json:"registered,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Reasons of a link's removal other than a request to remove it.
const (
	// LinkRemovedByReset: an admin set the user's password; a link proven
	// by the old password may be whoever knew it.
	LinkRemovedByReset = "password-reset"
	// LinkRemovedByDeactivation: the user was deactivated.
	LinkRemovedByDeactivation = "deactivated"
)

// Link is the projection of a link.
type Link struct {
	IdPID           string `db:"idp_id"`
	ExternalSubject string `db:"external_subject"`
	UserID          string `db:"user_id"`
	OrgID           string `db:"org_id"`
	// ExternalUserName is the user name the IdP gave when linked.
	ExternalUserName string `db:"external_user_name"`
	// Issuer and ClientID: the provider's identity when linked.
	Issuer   string `db:"issuer"`
	ClientID string `db:"client_id"`
	// Registered: the link came with the user (see IdPLink).
	Registered   bool      `db:"registered"`
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
}

func registerLinks(es *eventstore.Store) {
	es.Register(EventIdPLinkAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p IdPLink
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		// The primary key (idp_id, external_subject) and UNIQUE (user_id,
		// idp_id) turn a lost race into eventstore.ErrUnique.
		if _, err := tx.Exec(ctx, `INSERT INTO user_links (idp_id, external_subject, user_id, org_id, external_user_name,
			issuer, client_id, registered, creation_date, change_date, sequence)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.IdPID, p.ExternalSubject, e.AggregateID, e.ResourceOwner, p.ExternalUserName,
			p.Issuer, p.ClientID, p.Registered, e.CreatedAt, e.CreatedAt, e.Sequence); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
	es.Register(EventIdPLinkRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p IdPLink
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM user_links WHERE idp_id = ? AND external_subject = ? AND user_id = ?`,
			p.IdPID, p.ExternalSubject, e.AggregateID); err != nil {
			return err
		}
		// A link is a credential: what was signed in through it ends with
		// it (the user's sessions and tokens, as a password reset ends them).
		if err := CutAccess(ctx, tx, e.AggregateID, e.CreatedAt); err != nil {
			return err
		}
		return touch(ctx, tx, e)
	})
}

const linkColumns = `l.idp_id, l.external_subject, l.user_id, l.org_id, l.external_user_name, l.issuer, l.client_id,
	l.registered, l.creation_date, l.change_date, l.sequence`

// linkFrom selects the links that still name their provider: its issuer
// and client id are those of the link (a change drops the links anyway;
// this holds should one survive).
const linkFrom = ` FROM user_links l JOIN idps p ON p.id = l.idp_id AND p.issuer = l.issuer AND p.client_id = l.client_id`

// Link returns the link of an external identity, or db.ErrNotFound.
func (q *Queries) Link(ctx context.Context, idpID, subject string) (*Link, error) {
	var l Link
	if err := q.DB.Get(ctx, &l, `SELECT `+linkColumns+linkFrom+` WHERE l.idp_id = ? AND l.external_subject = ?`,
		idpID, subject); err != nil {
		return nil, fmt.Errorf("link of idp %s: %w", idpID, db.NotFound(err))
	}
	return &l, nil
}

// LinkOfUser returns the user's link to an IdP, or db.ErrNotFound.
func (q *Queries) LinkOfUser(ctx context.Context, userID, idpID string) (*Link, error) {
	var l Link
	if err := q.DB.Get(ctx, &l, `SELECT `+linkColumns+linkFrom+` WHERE l.user_id = ? AND l.idp_id = ?`,
		userID, idpID); err != nil {
		return nil, fmt.Errorf("link of user %s: %w", userID, db.NotFound(err))
	}
	return &l, nil
}

// External names an identity at an external IdP.
type External struct {
	IdPID string
	// Issuer and ClientID: the IdP's identity (see IdPLink).
	Issuer, ClientID string
	Subject          string
	// UserName is the user name the IdP gave (for display only).
	UserName string
}

// LinksOfUser returns a page of the user's links by creation, and the
// total.
func (q *Queries) LinksOfUser(ctx context.Context, userID string, p Page) ([]Link, uint64, error) {
	var total uint64
	if err := q.DB.Get(ctx, &total, `SELECT COUNT(*)`+linkFrom+` WHERE l.user_id = ?`, userID); err != nil {
		return nil, 0, fmt.Errorf("count links: %w", err)
	}
	var out []Link
	if err := q.DB.Select(ctx, &out, `SELECT `+linkColumns+linkFrom+` WHERE l.user_id = ?
		ORDER BY l.creation_date `+p.direction()+`, l.idp_id `+p.direction()+` LIMIT ? OFFSET ?`, userID, p.Limit, p.Offset); err != nil {
		return nil, 0, fmt.Errorf("list links: %w", err)
	}
	return out, total, nil
}

// checkUnlinked is AlreadyExists when the external identity is linked to
// anyone, or userID ("" for a new user) already has a link to the IdP.
func (c *Commands) checkUnlinked(ctx context.Context, userID string, x External) error {
	switch _, err := c.Q.Link(ctx, x.IdPID, x.Subject); {
	case err == nil:
		return apierr.AlreadyExists("USER-external-linked", "the external identity is already linked to a user")
	case !errors.Is(err, db.ErrNotFound):
		return err
	}
	if userID == "" {
		return nil
	}
	switch _, err := c.Q.LinkOfUser(ctx, userID, x.IdPID); {
	case err == nil:
		return apierr.AlreadyExists("USER-idp-linked", "the user already has a link to this identity provider")
	case !errors.Is(err, db.ErrNotFound):
		return err
	}
	return nil
}

// AddLink links human user u to the external identity x. The caller checks
// that the IdP is active and of u's organization. AlreadyExists when x is
// linked to anyone or u already has a link to the IdP (checked first, and
// by the projection's keys against a concurrent link).
func (c *Commands) AddLink(ctx context.Context, editor string, u *User, x External) ([]eventstore.Event, error) {
	if err := c.checkUnlinked(ctx, u.ID, x); err != nil {
		return nil, err
	}
	return c.push(ctx, editor, u, EventIdPLinkAdded, x.added(false))
}

// added is the payload of linking x; registered: with a new user.
func (x External) added(registered bool) IdPLink {
	return IdPLink{IdPID: x.IdPID, ExternalSubject: x.Subject, ExternalUserName: x.UserName,
		Issuer: x.Issuer, ClientID: x.ClientID, Registered: registered}
}

// passwordLinks are the removals of u's links that were proven by its
// password (not registered with it), for an admin's reset or a
// deactivation: whoever knew the password may have made them.
func (c *Commands) passwordLinks(ctx context.Context, u *User, reason string) ([]eventstore.Pending, error) {
	var links []Link
	if err := c.ES.DB().Select(ctx, &links, `SELECT `+linkColumns+` FROM user_links l WHERE l.user_id = ? AND l.registered = ?`,
		u.ID, false); err != nil {
		return nil, fmt.Errorf("users: links of %s: %w", u.ID, err)
	}
	out := make([]eventstore.Pending, 0, len(links))
	for _, l := range links {
		out = append(out, eventstore.Pending{Type: EventIdPLinkRemoved,
			Payload: IdPLink{IdPID: l.IdPID, ExternalSubject: l.ExternalSubject, Reason: reason}})
	}
	return out, nil
}

// RemoveLink removes the link l of user u; the user's sessions and tokens
// end with it (the reducer cuts access, as a password reset does).
func (c *Commands) RemoveLink(ctx context.Context, editor string, u *User, l *Link) ([]eventstore.Event, error) {
	return c.push(ctx, editor, u, EventIdPLinkRemoved, IdPLink{IdPID: l.IdPID, ExternalSubject: l.ExternalSubject})
}

// AddExternalHuman creates a human user without a password in org, linked
// to the external identity x, in one push: either both exist afterwards or
// neither. The user is active (p.External), since it signs in through the
// IdP. AlreadyExists when x is already linked or the user name is taken.
func (c *Commands) AddExternalHuman(ctx context.Context, editor string, org *orgs.Org, p HumanAdded, x External) (string, []eventstore.Event, error) {
	if err := c.checkUnlinked(ctx, "", x); err != nil {
		return "", nil, err
	}
	email := ""
	if p.EmailVerified {
		email = p.Email
	}
	if err := c.loginNameFree(ctx, org.ID, p.UserName, email); err != nil {
		return "", nil, err
	}
	p.External, p.PasswordHash, p.PasswordChangeRequired = true, "", false
	id := secrets.NewID()
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: Aggregate, ID: id, ResourceOwner: org.ID},
		Events: []eventstore.Pending{
			{Type: EventHumanAdded, Payload: p},
			{Type: EventIdPLinkAdded, Payload: x.added(true)},
		},
	})
	if err != nil {
		return "", nil, apierr.FromStore(err, "user "+p.UserName+" or the link of its external identity")
	}
	return id, evs, nil
}
