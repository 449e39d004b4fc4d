package orgs

// Domains of an organization, as ZITADEL has them: an organization adds a
// domain, generates a validation (a token to publish as a file over HTTP
// or as a DNS TXT record), validates it (the token is looked for there)
// and may then make it its primary domain, the domain of its users' login
// names (userName@primaryDomain). A domain is verified by at most one
// organization (the unique index org_domains_verified). Each
// organization's generated primary domain, a name under the issuer's host,
// is the instance's: verified from the start (EventOrgAdded's reducer), and
// no organization can add a name there.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/idna"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

// Domain events of the org aggregate (ZITADEL's names). Payloads:
// {"domain"}; EventDomainVerificationAdded also has "validationType" and
// "validationCode".
const (
	EventDomainAdded              = "org.domain.added"
	EventDomainVerificationAdded  = "org.domain.verification.added"
	EventDomainVerified           = "org.domain.verified"
	EventDomainVerificationFailed = "org.domain.verification.failed"
	EventDomainPrimarySet         = "org.domain.primary.set"
	EventDomainRemoved            = "org.domain.removed"
)

// Validation types (ZITADEL's DomainValidationType; 0 is unspecified).
const (
	ValidationHTTP int32 = 1
	ValidationDNS  int32 = 2
)

// ChallengePath is where the HTTP validation's file lies under the domain
// (ChallengePath + token; its body is the token); ChallengeLabel precedes
// the domain in the name of the DNS validation's TXT record (its value is
// the token).
const (
	ChallengePath  = "/.well-known/gatehouse-challenge/"
	ChallengeLabel = "_gatehouse-challenge."
)

// Domain is a domain of an organization (a row of org_domains). Domain is
// the lowercased ASCII (IDNA) name; ValidationType is the last generated
// validation's (0: none).
type Domain struct {
	OrgID          string    `db:"org_id"`
	Domain         string    `db:"domain"`
	Verified       bool      `db:"verified"`
	Primary        bool      `db:"is_primary"`
	ValidationType int32     `db:"validation_type"`
	CreationDate   time.Time `db:"creation_date"`
	ChangeDate     time.Time `db:"change_date"`
	Sequence       uint64    `db:"sequence"`
}

// domainState is a Domain with its pending validation's token ("" when
// none was generated or the domain is verified).
type domainState struct {
	Domain
	ValidationCode string `db:"validation_code"`
}

func (d *domainState) name() string { return d.Domain.Domain }

const domainColumns = `org_id, domain, verified, is_primary, validation_type, validation_code, creation_date, change_date, sequence`

// Checker looks for a validation's token where the organization was told
// to put it (package domaincheck). A nil error means it is there. The
// error's message is shown to the caller of ValidateDomain, so it must be
// client-safe: what was found, not the server's internals.
type Checker interface {
	// CheckHTTP wants the token as the body of
	// http://domain + ChallengePath + token.
	CheckHTTP(ctx context.Context, domain, token string) error
	// CheckDNS wants a TXT record of ChallengeLabel + domain to be the
	// token.
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

// registerDomains adds the reducers of the domain events; each also
// touches the org projection (change date, sequence, version).
func registerDomains(es *eventstore.Store) {
	on := func(typ string, reduce func(ctx context.Context, tx db.Querier, e eventstore.Event, domain string) error) {
		es.Register(typ, func(ctx context.Context, tx db.Querier, e eventstore.Event) error {
			var p domainPayload
			if err := e.Unmarshal(&p); err != nil {
				return err
			}
			if err := reduce(ctx, tx, e, p.Domain); err != nil {
				return err
			}
			return touch(ctx, tx, e)
		})
	}
	on(EventDomainAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event, d string) error {
		_, err := tx.Exec(ctx, `INSERT INTO org_domains (`+domainColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.AggregateID, d, false, false, 0, "", e.CreatedAt, e.CreatedAt, e.Sequence)
		return err
	})
	on(EventDomainVerificationAdded, func(ctx context.Context, tx db.Querier, e eventstore.Event, d string) error {
		var p verificationAdded
		if err := e.Unmarshal(&p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE org_domains SET validation_type = ?, validation_code = ?, change_date = ?, sequence = ?
			WHERE org_id = ? AND domain = ?`, p.ValidationType, p.ValidationCode, e.CreatedAt, e.Sequence, e.AggregateID, d)
		return err
	})
	on(EventDomainVerified, func(ctx context.Context, tx db.Querier, e eventstore.Event, d string) error {
		// The unique index org_domains_verified refuses a domain another
		// organization verified (eventstore.ErrUnique).
		_, err := tx.Exec(ctx, `UPDATE org_domains SET verified = ?, validation_code = '', change_date = ?, sequence = ?
			WHERE org_id = ? AND domain = ?`, true, e.CreatedAt, e.Sequence, e.AggregateID, d)
		return err
	})
	on(EventDomainVerificationFailed, func(ctx context.Context, tx db.Querier, e eventstore.Event, d string) error {
		// The validation stays: the organization may fix the file or
		// record and validate again.
		_, err := tx.Exec(ctx, `UPDATE org_domains SET change_date = ?, sequence = ? WHERE org_id = ? AND domain = ?`,
			e.CreatedAt, e.Sequence, e.AggregateID, d)
		return err
	})
	on(EventDomainPrimarySet, func(ctx context.Context, tx db.Querier, e eventstore.Event, d string) error {
		if _, err := tx.Exec(ctx, `UPDATE org_domains SET is_primary = (domain = ?), change_date = ?, sequence = ?
			WHERE org_id = ? AND (is_primary OR domain = ?)`, d, e.CreatedAt, e.Sequence, e.AggregateID, d); err != nil {
			return err
		}
		// Login names are userName@primary_domain: they follow. The
		// column is UNIQUE (eventstore.ErrUnique).
		_, err := tx.Exec(ctx, `UPDATE orgs SET primary_domain = ? WHERE id = ?`, d, e.AggregateID)
		return err
	})
	on(EventDomainRemoved, func(ctx context.Context, tx db.Querier, e eventstore.Event, d string) error {
		_, err := tx.Exec(ctx, `DELETE FROM org_domains WHERE org_id = ? AND domain = ?`, e.AggregateID, d)
		return err
	})
}

// addPrimaryDomain records an organization's generated primary domain as
// verified and primary (part of EventOrgAdded's reducer, so rebuilt
// projections have it too): it is the instance's name.
func addPrimaryDomain(ctx context.Context, tx db.Querier, e eventstore.Event, domain string) error {
	_, err := tx.Exec(ctx, `INSERT INTO org_domains (`+domainColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.AggregateID, strings.ToLower(domain), true, true, 0, "", e.CreatedAt, e.CreatedAt, e.Sequence)
	return err
}

var errNoDomain = apierr.NotFound("ORG-domain-not-found", "the organization has no such domain")

// NormalizeDomain returns name as stored: lowercased, IDNA to its ASCII
// (punycode) form, surrounding space and one trailing dot removed. It
// must be a DNS name of letters, digits and hyphens in at least two labels
// of at most 63 characters, at most 253 characters in all, whose last
// label is not all digits: no IP address, port, path or wildcard.
// Otherwise InvalidArgument (ORG-domain-invalid).
func NormalizeDomain(name string) (string, error) {
	bad := func() error {
		if len(name) > 300 {
			name = name[:300] + "…"
		}
		return apierr.InvalidArgument("ORG-domain-invalid", "%q is not a domain name", name)
	}
	if len(name) > 1024 {
		return "", bad()
	}
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return "", bad()
	}
	ascii, err := idna.Lookup.ToASCII(d)
	if err != nil || ascii == "" || len(ascii) > 253 {
		return "", bad()
	}
	labels := strings.Split(ascii, ".")
	if len(labels) < 2 {
		return "", bad()
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", bad()
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", bad()
			}
		}
	}
	// No top-level domain is numeric; "127.1" would be an address to some
	// resolvers.
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", bad()
	}
	return ascii, nil
}

// domain returns org's domain d (normalized), or errNoDomain.
func (q *Queries) domain(ctx context.Context, orgID, d string) (*domainState, error) {
	var out domainState
	err := q.DB.Get(ctx, &out, `SELECT `+domainColumns+` FROM org_domains WHERE org_id = ? AND domain = ?`, orgID, d)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, errNoDomain
	}
	if err != nil {
		return nil, fmt.Errorf("orgs: domain: %w", err)
	}
	return &out, nil
}

// Domains returns every domain of org, ordered by name.
func (q *Queries) Domains(ctx context.Context, orgID string) ([]Domain, error) {
	var rows []domainState
	if err := q.DB.Select(ctx, &rows, `SELECT `+domainColumns+` FROM org_domains WHERE org_id = ?`, orgID); err != nil {
		return nil, fmt.Errorf("orgs: domains: %w", err)
	}
	out := make([]Domain, len(rows))
	for i, r := range rows {
		out[i] = r.Domain
	}
	slices.SortFunc(out, func(a, b Domain) int { return cmp.Compare(a.Domain, b.Domain) })
	return out, nil
}

// ListDomains returns org's domains whose name matches nameQuery with
// method (textquery's rules; nameQuery "" matches every domain), ordered
// by name. An undefined method is InvalidArgument (ORG-invalid-query).
// An organization has few domains, so they are filtered here rather than
// in SQL, alike on both dialects.
func (q *Queries) ListDomains(ctx context.Context, orgID, nameQuery string, method textquery.Method) ([]Domain, error) {
	if !method.Valid() {
		return nil, apierr.InvalidArgument("ORG-invalid-query", "method is not a defined value")
	}
	all, err := q.Domains(ctx, orgID)
	if err != nil || nameQuery == "" {
		return all, err
	}
	return slices.DeleteFunc(all, func(d Domain) bool { return !method.Match(d.Domain, nameQuery) }), nil
}

// DomainVerified reports whether org verified domain, compared as
// NormalizeDomain stores it (case-insensitively, IDNA names by their ASCII
// form); a name that is not a domain is not verified. For the claims'
// email_verified.
func (q *Queries) DomainVerified(ctx context.Context, orgID, domain string) (bool, error) {
	d, err := NormalizeDomain(domain)
	if err != nil {
		// Not a DNS name, yet possibly a generated primary domain: on an
		// issuer named by an IP address it is <name>.<address>, stored as
		// generated.
		if d = storedForm(domain); d == "" {
			return false, nil
		}
	}
	var n int
	if err := q.DB.Get(ctx, &n, `SELECT COUNT(*) FROM org_domains WHERE org_id = ? AND domain = ? AND verified = ?`,
		orgID, d, true); err != nil {
		return false, fmt.Errorf("orgs: domain verified: %w", err)
	}
	return n > 0, nil
}

// pushDomain appends an event to org's aggregate at org.Version: a
// concurrent change of the organization is Aborted (COMMAND-concurrent).
func (c *Commands) pushDomain(ctx context.Context, editor string, org *Org, typ string, payload any) ([]eventstore.Event, error) {
	out, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: AggregateOrg, ID: org.ID, ResourceOwner: org.ID},
		Version:   org.Version,
		Events:    []eventstore.Pending{{Type: typ, Payload: payload}},
	})
	return out, apierr.FromStore(err, "the organization")
}

// reserved reports whether d is the issuer's host or a name under it,
// where the instance generates every organization's primary domain.
func (c *Commands) reserved(d string) bool {
	host, err := NormalizeDomain(c.IssuerHost)
	if err != nil {
		host = storedForm(c.IssuerHost)
	}
	return host != "" && (d == host || strings.HasSuffix(d, "."+host))
}

// AddDomain adds the unverified domain name (NormalizeDomain) to org.
// Errors: InvalidArgument (ORG-domain-invalid) for a name that is not a
// domain, InvalidArgument (ORG-domain-reserved) for the issuer's host and
// names under it, AlreadyExists (ORG-domain-exists) when org has it,
// Aborted when org changed concurrently. A domain another organization
// verified may be added (as ZITADEL allows) but never verified.
func (c *Commands) AddDomain(ctx context.Context, editor string, org *Org, name string) ([]eventstore.Event, error) {
	d, err := NormalizeDomain(name)
	if err != nil {
		return nil, err
	}
	if c.reserved(d) {
		return nil, apierr.InvalidArgument("ORG-domain-reserved", "%s is the issuer's host or a name under it, which are the instance's", d)
	}
	switch _, err := (&Queries{DB: c.ES.DB()}).domain(ctx, org.ID, d); {
	case err == nil:
		return nil, apierr.AlreadyExists("ORG-domain-exists", "the organization has the domain %s already", d)
	case !errors.Is(err, errNoDomain):
		return nil, err
	}
	evs, err := c.pushDomain(ctx, editor, org, EventDomainAdded, domainPayload{Domain: d})
	if connect.CodeOf(err) == connect.CodeAlreadyExists { // added concurrently (the primary key)
		return nil, apierr.AlreadyExists("ORG-domain-exists", "the organization has the domain %s already", d)
	}
	return evs, err
}

// existing returns org's domain name: InvalidArgument for a name that is
// not a domain, NotFound (ORG-domain-not-found) when org has none.
func (c *Commands) existing(ctx context.Context, org *Org, name string) (*domainState, error) {
	d, err := NormalizeDomain(name)
	if err != nil {
		// A generated primary domain under an issuer named by an IP
		// address is no DNS name: found as stored, or the name's error.
		dom, lerr := (&Queries{DB: c.ES.DB()}).domain(ctx, org.ID, storedForm(name))
		if lerr != nil {
			return nil, err
		}
		return dom, nil
	}
	return (&Queries{DB: c.ES.DB()}).domain(ctx, org.ID, d)
}

// storedForm is name as a generated domain is stored: lowercased, without
// a trailing dot.
func storedForm(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// unverified is existing, and Aborted (ORG-domain-verified) for a
// verified domain.
func (c *Commands) unverified(ctx context.Context, org *Org, name string) (*domainState, error) {
	dom, err := c.existing(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if dom.Verified {
		return nil, apierr.Precondition("ORG-domain-verified", "the domain %s is verified already", dom.name())
	}
	return dom, nil
}

// GenerateDomainValidation gives org's unverified domain name a new random
// token for typ (ValidationHTTP or ValidationDNS), replacing any earlier
// one, and returns it with where to put it (ChallengeWhere): the file's
// URL http://domain/.well-known/gatehouse-challenge/<token>, whose body
// must be the token (HTTP), or the TXT record's name
// _gatehouse-challenge.<domain>, whose value must be the token (DNS).
// Errors: InvalidArgument (ORG-domain-validation-type) for another typ,
// InvalidArgument (ORG-domain-invalid) for a name that is not a domain,
// NotFound (ORG-domain-not-found) when org has no such domain, Aborted
// (ORG-domain-verified) when it is verified, Aborted when org changed
// concurrently.
func (c *Commands) GenerateDomainValidation(ctx context.Context, editor string, org *Org, name string, typ int32) (token, where string, err error) {
	if typ != ValidationHTTP && typ != ValidationDNS {
		return "", "", apierr.InvalidArgument("ORG-domain-validation-type", "type must be DOMAIN_VALIDATION_TYPE_HTTP or DOMAIN_VALIDATION_TYPE_DNS")
	}
	dom, err := c.unverified(ctx, org, name)
	if err != nil {
		return "", "", err
	}
	token = rand.Text() // 26 characters of base32: 130 bits, safe in a URL path and a TXT record
	if _, err := c.pushDomain(ctx, editor, org, EventDomainVerificationAdded,
		verificationAdded{Domain: dom.name(), ValidationType: typ, ValidationCode: token}); err != nil {
		return "", "", err
	}
	return token, ChallengeWhere(dom.name(), token, typ), nil
}

// ChallengeWhere is where a validation of typ puts token: the file's URL
// (HTTP) or the TXT record's name (DNS).
func ChallengeWhere(domain, token string, typ int32) string {
	if typ == ValidationDNS {
		return ChallengeLabel + domain
	}
	return "http://" + domain + ChallengePath + token
}

// lookedFor describes, for an error, what a validation looks for.
func lookedFor(dom *domainState) string {
	if dom.ValidationType == ValidationDNS {
		return fmt.Sprintf("a TXT record %s whose value is %s", ChallengeLabel+dom.name(), dom.ValidationCode)
	}
	return fmt.Sprintf("the file %s whose body is the token", ChallengeWhere(dom.name(), dom.ValidationCode, ValidationHTTP))
}

// ValidateDomain looks for the token of org's domain name with check and,
// when it is there, verifies the domain (EventDomainVerified). A miss is
// recorded (EventDomainVerificationFailed; the validation stays, to be
// retried) and answered Aborted (ORG-domain-validation-failed) naming what
// was looked for and check's message. Other errors: InvalidArgument
// (ORG-domain-invalid), NotFound (ORG-domain-not-found), Aborted
// (ORG-domain-verified) for a verified domain, Aborted
// (ORG-domain-no-validation) when no validation was generated,
// AlreadyExists (ORG-domain-taken) when another organization verified the
// domain (before the check, which then does not run, or meanwhile: the
// unique index decides; nothing is verified), Aborted when org changed
// concurrently, and the context's error when ctx ends during the check
// (nothing recorded).
func (c *Commands) ValidateDomain(ctx context.Context, editor string, org *Org, name string, check Checker) ([]eventstore.Event, error) {
	dom, err := c.unverified(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if dom.ValidationCode == "" || (dom.ValidationType != ValidationHTTP && dom.ValidationType != ValidationDNS) {
		return nil, apierr.Precondition("ORG-domain-no-validation", "generate a validation for %s first", dom.name())
	}
	var taken int
	if err := c.ES.DB().Get(ctx, &taken, `SELECT COUNT(*) FROM org_domains WHERE domain = ? AND verified = ? AND org_id <> ?`,
		dom.name(), true, org.ID); err != nil {
		return nil, fmt.Errorf("orgs: domain taken: %w", err)
	}
	if taken > 0 {
		return nil, errDomainTaken(dom.name())
	}
	if check == nil {
		return nil, errors.New("orgs: no domain checker")
	}
	if dom.ValidationType == ValidationDNS {
		err = check.CheckDNS(ctx, dom.name(), dom.ValidationCode)
	} else {
		err = check.CheckHTTP(ctx, dom.name(), dom.ValidationCode)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if _, perr := c.pushDomain(ctx, editor, org, EventDomainVerificationFailed, domainPayload{Domain: dom.name()}); perr != nil {
			return nil, perr
		}
		return nil, apierr.Precondition("ORG-domain-validation-failed", "the domain %s is not verified: looked for %s: %v",
			dom.name(), lookedFor(dom), err)
	}
	evs, err := c.pushDomain(ctx, editor, org, EventDomainVerified, domainPayload{Domain: dom.name()})
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil, errDomainTaken(dom.name()) // verified elsewhere meanwhile (the unique index)
	}
	return evs, err
}

func errDomainTaken(d string) error {
	return apierr.AlreadyExists("ORG-domain-taken", "the domain %s is verified by another organization", d)
}

// RemoveDomain removes org's domain name, verified or not, but not the
// primary one. Errors: InvalidArgument (ORG-domain-invalid), NotFound
// (ORG-domain-not-found), Aborted (ORG-domain-primary) for the primary
// domain, Aborted when org changed concurrently.
func (c *Commands) RemoveDomain(ctx context.Context, editor string, org *Org, name string) ([]eventstore.Event, error) {
	dom, err := c.existing(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if dom.Primary {
		return nil, apierr.Precondition("ORG-domain-primary", "the primary domain cannot be removed; make another one primary first")
	}
	return c.pushDomain(ctx, editor, org, EventDomainRemoved, domainPayload{Domain: dom.name()})
}

// SetPrimaryDomain makes org's verified domain name its primary domain:
// orgs.primary_domain, so its users' login names become
// userName@domain. Errors: InvalidArgument (ORG-domain-invalid), NotFound
// (ORG-domain-not-found), Aborted (ORG-domain-unverified) for an
// unverified domain, Aborted (ORG-domain-primary-already) when it is the
// primary one, AlreadyExists (ORG-domain-primary-taken) when it is another
// organization's primary domain (the UNIQUE column; only data from
// before verified domains could have that), Aborted when org changed
// concurrently.
func (c *Commands) SetPrimaryDomain(ctx context.Context, editor string, org *Org, name string) ([]eventstore.Event, error) {
	dom, err := c.existing(ctx, org, name)
	if err != nil {
		return nil, err
	}
	if !dom.Verified {
		return nil, apierr.Precondition("ORG-domain-unverified", "only a verified domain can be primary; %s is not verified", dom.name())
	}
	if dom.Primary {
		return nil, apierr.Precondition("ORG-domain-primary-already", "%s is the primary domain already", dom.name())
	}
	evs, err := c.pushDomain(ctx, editor, org, EventDomainPrimarySet, domainPayload{Domain: dom.name()})
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return nil, apierr.AlreadyExists("ORG-domain-primary-taken", "%s is another organization's primary domain", dom.name())
	}
	return evs, err
}
