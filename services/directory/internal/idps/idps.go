package idps

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Aggregate type and event types.
const (
	Aggregate = "idp"

	EventOIDCAdded         = "idp.oidc.added"
	EventOIDCConfigChanged = "idp.oidc.config.changed"
	EventDeactivated       = "idp.deactivated"
	EventReactivated       = "idp.reactivated"
	EventRemoved           = "idp.removed"
	EventTrustChanged      = "idp.trust.changed"
)

// States, styling types, owner types and mapping fields (the management
// API's enum numbers).
const (
	StateActive   int32 = 1
	StateInactive int32 = 2

	StylingUnspecified int32 = 0
	StylingVendor      int32 = 1

	// OwnerOrg: every IdP of this package belongs to an organization.
	OwnerOrg int32 = 2

	MappingUnspecified       int32 = 0
	MappingPreferredUsername int32 = 1
	MappingEmail             int32 = 2
)

// The limits of what the management API takes (an IdP's id and the
// configuration's name, client id, client secret and issuer: 200
// characters; at most 20 scopes of 200; the texts of IdP queries: 200
// characters) are protovalidate rules in the management protos, checked by
// apierr.CheckLimits.

// ErrNameTaken: another IdP of the organization has the name (ZITADEL keeps
// IdP names unique per resource owner).
var ErrNameTaken = errors.New("idps: name taken in the organization")

// Config is the OIDC configuration an update replaces as a whole.
type Config struct {
	ClientID           string     `json:"clientId" db:"client_id"`
	Issuer             string     `json:"issuer" db:"issuer"`
	Scopes             StringList `json:"scopes" db:"scopes"`
	DisplayNameMapping int32      `json:"displayNameMapping" db:"display_name_mapping"`
	UsernameMapping    int32      `json:"usernameMapping" db:"username_mapping"`
}

// Equal reports whether c and o configure the same thing; no scopes and an
// empty list are the same.
func (c Config) Equal(o Config) bool {
	return c.ClientID == o.ClientID && c.Issuer == o.Issuer && slices.Equal(c.Scopes, o.Scopes) &&
		c.DisplayNameMapping == o.DisplayNameMapping && c.UsernameMapping == o.UsernameMapping
}

// IDP is the projection of an identity provider.
type IDP struct {
	ID           string `db:"id"`
	OrgID        string `db:"org_id"`
	Name         string `db:"name"`
	StylingType  int32  `db:"styling_type"`
	State        int32  `db:"state"`
	AutoRegister bool   `db:"auto_register"`
	// TrustAMR: an IAM owner trusts the provider's "amr" values.
	TrustAMR bool `db:"trust_amr"`
	Config
	// EncryptedSecret is the client secret sealed with the IdP cipher (aad:
	// the IdP id); see Secrets.ClientSecret.
	EncryptedSecret []byte    `db:"client_secret"`
	CreationDate    time.Time `db:"creation_date"`
	ChangeDate      time.Time `db:"change_date"`
	Sequence        uint64    `db:"sequence"`
	Version         uint64    `db:"version"`
}

// Aggregate returns the IdP's aggregate identity.
func (p *IDP) Aggregate() eventstore.Aggregate {
	return eventstore.Aggregate{Type: Aggregate, ID: p.ID, ResourceOwner: p.OrgID}
}

// RequestScopes are the scopes to request from the IdP in the federation
// flow: "openid" first (always requested), then the configured ones.
func (p *IDP) RequestScopes() []string {
	out := []string{"openid"}
	for _, s := range p.Scopes {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// OIDCAdded is the payload of EventOIDCAdded. ClientSecret is ciphertext:
// events are the audit log and must not hold the plaintext.
type OIDCAdded struct {
	Name         string `json:"name"`
	StylingType  int32  `json:"stylingType"`
	AutoRegister bool   `json:"autoRegister"`
	Config
	ClientSecret []byte `json:"clientSecret"`
}

// OIDCConfigChanged is the payload of EventOIDCConfigChanged: the complete
// new configuration. ClientSecret (ciphertext) is absent when the stored
// secret is kept.
type OIDCConfigChanged struct {
	Config
	ClientSecret []byte `json:"clientSecret,omitempty"`
	// LinksDropped: the issuer or client id changed, so the provider is
	// another one and every user's link to it is removed (for the audit
	// log; the reducer compares the identities itself).
	LinksDropped bool `json:"linksDropped,omitempty"`
}

// SameProvider reports whether c and o name the same provider: the same
// issuer (the namespace of its subjects) and client id (which account
// there Gatehouse is). A user's link to one is a credential that must
// never pass to another.
func (c Config) SameProvider(o Config) bool {
	return c.Issuer == o.Issuer && c.ClientID == o.ClientID
}

// TrustChanged is the payload of EventTrustChanged.
type TrustChanged struct {
	TrustAMR bool `json:"trustAmr"`
}

// Removed is the payload of EventRemoved (the name, for the audit log).
type Removed struct {
	Name string `json:"name"`
}

// StringList is a list of strings stored as a JSON array.
type StringList []string

// Value implements driver.Valuer: never null, "[]" for an empty list.
func (l StringList) Value() (driver.Value, error) {
	if l == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]string(l))
	return string(b), err
}

// Scan implements sql.Scanner for TEXT (or BLOB) JSON arrays.
func (l *StringList) Scan(src any) error {
	var raw []byte
	switch v := src.(type) {
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	case nil:
		*l = nil
		return nil
	default:
		return fmt.Errorf("idps: cannot scan %T into a string list", src)
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("idps: decode string list: %w", err)
	}
	if len(out) == 0 {
		out = nil
	}
	*l = out
	return nil
}
