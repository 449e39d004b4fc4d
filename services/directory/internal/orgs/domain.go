package orgs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/idna"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Domain events of the org aggregate (ZITADEL's names).
const (
	EventDomainAdded              = "org.domain.added"
	EventDomainVerificationAdded  = "org.domain.verification.added"
	EventDomainVerified           = "org.domain.verified"
	EventDomainVerificationFailed = "org.domain.verification.failed"
	EventDomainPrimarySet         = "org.domain.primary.set"
	EventDomainRemoved            = "org.domain.removed"
)

// Validation types (ZITADEL's DomainValidationType).
const (
	ValidationHTTP int32 = 1
	ValidationDNS  int32 = 2
)

// ChallengePath is where the HTTP validation's file lies, under the
// domain; ChallengeLabel is the DNS validation's record name before it.
const (
	ChallengePath  = "/.well-known/gatehouse-challenge/"
	ChallengeLabel = "_gatehouse-challenge."
)

// Domain is a domain of an organization.
type Domain struct {
	OrgID          string    `db:"org_id"`
	Domain         string    `db:"domain"`
	Verified       bool      `db:"verified"`
	Primary        bool      `db:"is_primary"`
	ValidationType int32     `db:"validation_type"`
	ValidationCode string    `db:"validation_code"`
	CreationDate   time.Time `db:"creation_date"`
	ChangeDate     time.Time `db:"change_date"`
	Sequence       uint64    `db:"sequence"`
}

// Checker looks for a validation token where it was to be put.
type Checker interface {
	CheckHTTP(ctx context.Context, domain, token string) error
	CheckDNS(ctx context.Context, domain, token string) error
}

type domainPayload struct {
	Domain string `json:"domain"`
}

type verificationAdded struct {
	Domain         string `json:"domain"`
	ValidationType int32  `json:"validationType"`
	ValidationCode string `json:"validationCode"`
}

func registerDomains(es *eventstore.Store) {
	on := func(typ string, reduce func(ctx context.Context, tx db.Querier, e eventstore.Event) error) {
		es.Register(typ, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			if err := reduce(ctx, tx, e); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		})
	}
	on(EventDomainAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p domainPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO org_domains (org_id, domain, verified, is_primary, validation_type, validation_code,
			creation_date, change_date, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.AggregateID, p.Domain, false, false, 0, "", e.CreatedAt, e.CreatedAt, e.Sequence)
		return err
	})
	on(EventDomainVerificationAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p verificationAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE org_domains SET validation_type = ?, validation_code = ?, change_date = ?, sequence = ?
			WHERE org_id = ? AND domain = ?`, p.ValidationType, p.ValidationCode, e.CreatedAt, e.Sequence, e.AggregateID, p.Domain)
		return err
	})
	on(EventDomainVerified, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p domainPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE org_domains SET verified = ?, validation_code = '', change_date = ?, sequence = ?
			WHERE org_id = ? AND domain = ?`, true, e.CreatedAt, e.Sequence, e.AggregateID, p.Domain)
		return err
	})
	on(EventDomainVerificationFailed, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p domainPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE org_domains SET change_date = ?, sequence = ? WHERE org_id = ? AND domain = ?`,
			e.CreatedAt, e.Sequence, e.AggregateID, p.Domain)
		return err
	})
	on(EventDomainPrimarySet, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p domainPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE org_domains SET is_primary = (domain = ?), change_date = ?, sequence = ? WHERE org_id = ?`,
			p.Domain, e.CreatedAt, e.Sequence, e.AggregateID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE orgs SET primary_domain = ? WHERE id = ?`, p.Domain, e.AggregateID)
		return err
	})
	on(EventDomainRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
		var p domainPayload
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM org_domains WHERE org_id = ? AND domain = ?`, e.AggregateID, p.Domain)
		return err
	})
}

// addPrimaryDomain records an organization's generated primary domain,
// verified (the reducer of EventOrgAdded): it is the instance's name.
func addPrimaryDomain(ctx context.Context, tx db.Querier, e eventstore.Event, domain string) error {
	_, err := tx.Exec(ctx, `INSERT INTO org_domains (org_id, domain, verified, is_primary, validation_type, validation_code,
		creation_date, change_date, sequence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.AggregateID, strings.ToLower(domain), true, true, 0, "", e.CreatedAt, e.CreatedAt, e.Sequence)
	return err
}

var errNoDomain = apierr.NotFound("ORG-domain-not-found", "domain not found")

// NormalizeDomain lowercases a domain name (IDNA to its ASCII form, no
// trailing dot) and checks it is one: at least two labels of letters,
// digits and hyphens, at most 253 characters, no address, no port.
func NormalizeDomain(name string) (string, error) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
	bad := apierr.InvalidArgument("ORG-domain-invalid", "%q is not a domain name", name)
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return "", bad
	}
	ascii, err := idna.Lookup.ToASCII(d)
	if err != nil || ascii == "" || len(ascii) > 253 || !strings.Contains(ascii, ".") {
		return "", bad
	}
	for _, l := range strings.Split(ascii, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", bad
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", bad
			}
		}
	}
	return ascii, nil
}

// domain returns org's domain d, or NotFound.
func (q *Queries) domain(ctx context.Context, orgID, d string) (*Domain, error) {
	var out Domain
	err := q.DB.Get(ctx, &out, `SELECT org_id, domain, verified, is_primary, validation_type, validation_code, creation_date,
		change_date, sequence FROM org_domains WHERE org_id = ? AND domain = ?`, orgID, d)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, errNoDomain
	}
	if err != nil {
		return nil, fmt.Errorf("orgs: domain: %w", err)
	}
	return &out, nil
}

// Domains returns every domain of org.
func (q *Queries) Domains(ctx context.Context, orgID string) ([]Domain, error) {
	var out []Domain
	if err := q.DB.Select(ctx, &out, `SELECT org_id, domain, verified, is_primary, validation_type, validation_code, creation_date,
		change_date, sequence FROM org_domains WHERE org_id = ?`, orgID); err != nil {
		return nil, fmt.Errorf("orgs: domains: %w", err)
	}
	return out, nil
}

// DomainVerified reports whether org verified domain (a lowercased name).
func (q *Queries) DomainVerified(ctx context.Context, orgID, domain string) (bool, error) {
	if domain == "" {
		return false, nil
	}
	var n int
	if err := q.DB.Get(ctx, &n, `SELECT COUNT(*) FROM org_domains WHERE org_id = ? AND domain = ? AND verified = ?`,
		orgID, strings.ToLower(domain), true); err != nil {
		return false, fmt.Errorf("orgs: domain verified: %w", err)
	}
	return n > 0, nil
}

// pushDomain appends events to org's aggregate at its version.
func (c *Commands) pushDomain(ctx context.Context, editor string, org *Org, evs ...eventstore.Pending) ([]eventstore.Event, error) {
	out, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateOrg, ID: org.ID, ResourceOwner: org.ID},
		Version:   org.Version,
		Events:    evs,
	})
	return out, apierr.FromStore(err, "domain")
}

// AddDomain adds an unverified domain to org. The issuer's host and the
// names under it are the instance's (every organization's generated
// domain lies there): refused.
func (c *Commands) AddDomain(ctx context.Context, editor string, org *Org, name string) ([]eventstore.Event, error) {
	d, err := NormalizeDomain(name)
	if err != nil {
		return nil, err
	}
	host := strings.ToLower(c.IssuerHost)
	if d == host || strings.HasSuffix(d, "."+host) {
		return nil, apierr.InvalidArgument("ORG-domain-reserved", "%s is the issuer's (or under it): organizations cannot add it", d)
	}
	q := &Queries{DB: c.ES.DB()}
	if _, err := q.domain(ctx, org.ID, d); err == nil {
		return nil, apierr.AlreadyExists("ORG-domain-exists", "the organization has the domain %s", d)
	} else if !errors.Is(err, errNoDomain) {
		return nil, err
	}
	return c.pushDomain(ctx, editor, org, eventstore.Pending{Type: EventDomainAdded, Payload: domainPayload{Domain: d}})
}

// existing returns org's domain name (NotFound when it has none).
func (c *Commands) existing(ctx context.Context, org *Org, name string) (*Domain, error) {
	d, err := NormalizeDomain(name)
	if err != nil {
		return nil, err
	}
	return (&Queries{DB: c.ES.DB()}).domain(ctx, org.ID, d)
}

// unverified returns org's domain name, which must not be verified yet.
func (c *Commands) unverified(ctx context.Context, org *Org, name string) (*Domain, error) {
	dom, err := c.existing(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if dom.Verified {
		return nil, apierr.Precondition("ORG-domain-verified", "the domain %s is verified already", dom.Domain)
	}
	return dom, nil
}

// GenerateDomainValidation gives org's unverified domain a new token and
// says where to put it: the file's URL (HTTP) or the record's name (DNS).
func (c *Commands) GenerateDomainValidation(ctx context.Context, editor string, org *Org, name string, typ int32) (token, where string, err error) {
	if typ != ValidationHTTP && typ != ValidationDNS {
		return "", "", apierr.InvalidArgument("ORG-domain-validation-type", "type must be DOMAIN_VALIDATION_TYPE_HTTP or DOMAIN_VALIDATION_TYPE_DNS")
	}
	dom, err := c.unverified(ctx, org, name)
	if err != nil {
		return "", "", err
	}
	token = rand.Text()
	if _, err := c.pushDomain(ctx, editor, org, eventstore.Pending{Type: EventDomainVerificationAdded,
		Payload: verificationAdded{Domain: dom.Domain, ValidationType: typ, ValidationCode: token}}); err != nil {
		return "", "", err
	}
	return token, ChallengeWhere(dom.Domain, token, typ), nil
}

// ChallengeWhere is where a validation's token goes.
func ChallengeWhere(domain, token string, typ int32) string {
	if typ == ValidationDNS {
		return ChallengeLabel + domain
	}
	return "http://" + domain + ChallengePath + token
}

// ValidateDomain looks for the token with check and, when it is there,
// verifies the domain; a miss is recorded (EventDomainVerificationFailed)
// and answered 409 saying what was looked for. A domain another
// organization verified stays unverified here (AlreadyExists): a domain
// is one organization's.
func (c *Commands) ValidateDomain(ctx context.Context, editor string, org *Org, name string, check Checker) ([]eventstore.Event, error) {
	dom, err := c.unverified(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if dom.ValidationCode == "" {
		return nil, apierr.Precondition("ORG-domain-no-validation", "generate a validation for %s first", dom.Domain)
	}
	var taken int
	if err := c.ES.DB().Get(ctx, &taken, `SELECT COUNT(*) FROM org_domains WHERE domain = ? AND verified = ? AND org_id <> ?`,
		dom.Domain, true, org.ID); err != nil {
		return nil, fmt.Errorf("orgs: domain taken: %w", err)
	}
	if taken > 0 {
		return nil, errDomainTaken(dom.Domain)
	}
	if dom.ValidationType == ValidationDNS {
		err = check.CheckDNS(ctx, dom.Domain, dom.ValidationCode)
	} else {
		err = check.CheckHTTP(ctx, dom.Domain, dom.ValidationCode)
	}
	if err != nil {
		if _, perr := c.pushDomain(ctx, editor, org, eventstore.Pending{Type: EventDomainVerificationFailed,
			Payload: domainPayload{Domain: dom.Domain}}); perr != nil {
			return nil, perr
		}
		return nil, apierr.Precondition("ORG-domain-validation-failed", "the token for %s was not found at %s: %v",
			dom.Domain, ChallengeWhere(dom.Domain, dom.ValidationCode, dom.ValidationType), err)
	}
	evs, err := c.pushDomain(ctx, editor, org, eventstore.Pending{Type: EventDomainVerified, Payload: domainPayload{Domain: dom.Domain}})
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil, errDomainTaken(dom.Domain) // verified elsewhere meanwhile (the unique index)
	}
	return evs, err
}

func errDomainTaken(d string) error {
	return apierr.AlreadyExists("ORG-domain-taken", "the domain %s is verified by another organization", d)
}

// RemoveDomain removes org's domain; not the primary one.
func (c *Commands) RemoveDomain(ctx context.Context, editor string, org *Org, name string) ([]eventstore.Event, error) {
	dom, err := c.existing(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if dom.Primary {
		return nil, apierr.Precondition("ORG-domain-primary", "the primary domain cannot be removed; make another primary first")
	}
	return c.pushDomain(ctx, editor, org, eventstore.Pending{Type: EventDomainRemoved, Payload: domainPayload{Domain: dom.Domain}})
}

// SetPrimaryDomain makes org's verified domain its primary one (login
// names follow).
func (c *Commands) SetPrimaryDomain(ctx context.Context, editor string, org *Org, name string) ([]eventstore.Event, error) {
	dom, err := c.existing(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if !dom.Verified {
		return nil, apierr.Precondition("ORG-domain-unverified", "only a verified domain can be primary")
	}
	if dom.Primary {
		return nil, apierr.Precondition("ORG-domain-primary-already", "%s is the primary domain already", dom.Domain)
	}
	return c.pushDomain(ctx, editor, org, eventstore.Pending{Type: EventDomainPrimarySet, Payload: domainPayload{Domain: dom.Domain}})
}
