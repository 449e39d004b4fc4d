package projects

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Aggregate is the aggregate type of a project. Applications and their keys
// are events of their project's aggregate (as in ZITADEL), so the project's
// version orders every change to its apps.
const Aggregate = "project"

// Event types.
const (
	EventAdded             = "project.added"
	EventAppAdded          = "project.application.added"
	EventOIDCConfigChanged = "project.application.config.oidc.changed"
	EventAppSecretChanged  = "project.application.secret.changed"
	EventAppKeyAdded       = "project.application.key.added"
	EventAppKeyRemoved     = "project.application.key.removed"
	EventAppAdminClientSet = "project.application.admin_client.set"
)

// States of projects and apps (the management API's enum numbers).
const (
	StateActive   int32 = 1
	StateInactive int32 = 2
)

// App kinds, stored in apps.kind.
const (
	KindOIDC int32 = 1
	KindAPI  int32 = 2
)

// KeyTypeJSON is the only key file format (the API's KEY_TYPE_JSON).
const KeyTypeJSON int32 = 1

// ErrNameTaken is returned (wrapped) by Push when a project name is taken
// in the organization or an app name in the project.
var ErrNameTaken = errors.New("projects: name taken")

// Project is the projection of a project.
type Project struct {
	ID                     string    `db:"id"`
	OrgID                  string    `db:"org_id"`
	Name                   string    `db:"name"`
	State                  int32     `db:"state"`
	ProjectRoleAssertion   bool      `db:"project_role_assertion"`
	ProjectRoleCheck       bool      `db:"project_role_check"`
	HasProjectCheck        bool      `db:"has_project_check"`
	PrivateLabelingSetting int32     `db:"private_labeling_setting"`
	CreationDate           time.Time `db:"creation_date"`
	ChangeDate             time.Time `db:"change_date"`
	Sequence               uint64    `db:"sequence"`
	// Version counts every event of the aggregate, app events included.
	Version uint64 `db:"version"`
}

// Aggregate returns the project's aggregate identity.
func (p *Project) Aggregate() eventstore.Aggregate {
	return eventstore.Aggregate{Type: Aggregate, ID: p.ID, ResourceOwner: p.OrgID}
}

// App is the projection of an application. Exactly one of OIDC and API is
// set, decoded from the config column by Kind.
type App struct {
	ID         string `db:"id"`
	ProjectID  string `db:"project_id"`
	OrgID      string `db:"org_id"`
	Name       string `db:"name"`
	State      int32  `db:"state"`
	Kind       int32  `db:"kind"`
	ClientID   string `db:"client_id"`
	SecretHash []byte `db:"secret_hash"`
	Config     string `db:"config"`
	// CreationDate is the app's added event; ChangeDate and Sequence the
	// last event about the app (config, secret or key change).
	CreationDate time.Time `db:"creation_date"`
	ChangeDate   time.Time `db:"change_date"`
	Sequence     uint64    `db:"sequence"`
	// AdminClient: an IAM owner marked the app as an admin client.
	AdminClient bool `db:"admin_client"`

	OIDC *OIDCConfig `db:"-"`
	API  *APIConfig  `db:"-"`
}

// decode fills OIDC or API from Config.
func (a *App) decode() error {
	var err error
	switch a.Kind {
	case KindOIDC:
		a.OIDC = &OIDCConfig{}
		err = json.Unmarshal([]byte(a.Config), a.OIDC)
	case KindAPI:
		a.API = &APIConfig{}
		err = json.Unmarshal([]byte(a.Config), a.API)
	default:
		err = fmt.Errorf("unknown kind %d", a.Kind)
	}
	if err != nil {
		return fmt.Errorf("projects: app %s config: %w", a.ID, err)
	}
	return nil
}

// AuthMethod is the app's client authentication method (Auth* constants).
func (a *App) AuthMethod() string {
	if a.OIDC != nil {
		return a.OIDC.AuthMethod
	}
	if a.API != nil {
		return a.API.AuthMethod
	}
	return ""
}

// UsesSecret reports whether the app's auth method authenticates with a
// client secret.
func (a *App) UsesSecret() bool { return MethodUsesSecret(a.AuthMethod()) }

// Key is a registered public key of an application.
type Key struct {
	ID        string `db:"id"`
	AppID     string `db:"app_id"`
	ProjectID string `db:"project_id"`
	OrgID     string `db:"org_id"`
	Type      int32  `db:"type"`
	// PublicKey is the PKIX ("PUBLIC KEY") PEM.
	PublicKey string `db:"public_key"`
	// Expiration is nil for a key that does not expire.
	Expiration   *time.Time `db:"expiration_date"`
	CreationDate time.Time  `db:"creation_date"`
	ChangeDate   time.Time  `db:"change_date"`
	Sequence     uint64     `db:"sequence"`
}

// ProjectAdded is the payload of EventAdded.
type ProjectAdded struct {
	Name                   string `json:"name"`
	ProjectRoleAssertion   bool   `json:"projectRoleAssertion,omitempty"`
	ProjectRoleCheck       bool   `json:"projectRoleCheck,omitempty"`
	HasProjectCheck        bool   `json:"hasProjectCheck,omitempty"`
	PrivateLabelingSetting int32  `json:"privateLabelingSetting,omitempty"`
}

// appAdded is the payload of EventAppAdded. The secret is stored as its
// keyed hash only.
type appAdded struct {
	AppID      string      `json:"appId"`
	Name       string      `json:"name"`
	Kind       int32       `json:"kind"`
	ClientID   string      `json:"clientId"`
	SecretHash []byte      `json:"secretHash,omitempty"`
	OIDC       *OIDCConfig `json:"oidc,omitempty"`
	API        *APIConfig  `json:"api,omitempty"`
}

// oidcConfigChanged is the payload of EventOIDCConfigChanged: the complete
// new configuration.
type oidcConfigChanged struct {
	AppID  string     `json:"appId"`
	Config OIDCConfig `json:"config"`
}

// secretChanged is the payload of EventAppSecretChanged.
// adminClientSet is the payload of EventAppAdminClientSet.
type adminClientSet struct {
	AppID       string `json:"appId"`
	AdminClient bool   `json:"adminClient"`
}

type secretChanged struct {
	AppID      string `json:"appId"`
	SecretHash []byte `json:"secretHash"`
}

// keyAdded is the payload of EventAppKeyAdded (public key only).
type keyAdded struct {
	AppID      string     `json:"appId"`
	KeyID      string     `json:"keyId"`
	Type       int32      `json:"type"`
	PublicKey  string     `json:"publicKey"`
	Expiration *time.Time `json:"expirationDate,omitempty"`
}

// keyRemoved is the payload of EventAppKeyRemoved.
type keyRemoved struct {
	AppID string `json:"appId"`
	KeyID string `json:"keyId"`
}
