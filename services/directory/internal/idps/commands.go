package idps

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Secrets seals and opens IdP client secrets. The IdP id is the additional
// data, so a ciphertext copied to another IdP does not decrypt.
type Secrets struct{ Cipher *secrets.Cipher }

func (s Secrets) seal(idpID, secret string) ([]byte, error) {
	out, err := s.Cipher.Encrypt([]byte(secret), []byte(idpID))
	if err != nil {
		return nil, fmt.Errorf("encrypt idp client secret: %w", err)
	}
	return out, nil
}

// ClientSecret returns the decrypted client secret of idp, for the
// federation flow (the token request to the IdP). Never return it to API
// callers or log it.
func (s Secrets) ClientSecret(_ context.Context, idp *IDP) (string, error) {
	b, err := s.Cipher.Decrypt(idp.EncryptedSecret, []byte(idp.ID))
	if err != nil {
		return "", fmt.Errorf("decrypt client secret of idp %s: %w", idp.ID, err)
	}
	return string(b), nil
}

// Commands produces identity provider events. Inputs are validated by the
// caller (the management handlers); Commands enforces the rules that need
// stored state: unique names, state transitions and "no changes".
type Commands struct {
	ES     *eventstore.Store
	Cipher *secrets.Cipher // encrypts client secrets (secrets.PurposeIdPSecrets)
}

// NewOIDC is the input of AddOIDC.
type NewOIDC struct {
	Name         string
	StylingType  int32
	AutoRegister bool
	Config
	ClientSecret string
}

// AddOIDC creates an active OIDC identity provider in org and returns its
// id and the stored events. A name already used in the organization is
// AlreadyExists.
func (c *Commands) AddOIDC(ctx context.Context, editor, orgID string, in NewOIDC) (string, []eventstore.Event, error) {
	id := secrets.NewID()
	sealed, err := Secrets{c.Cipher}.seal(id, in.ClientSecret)
	if err != nil {
		return "", nil, err
	}
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: Aggregate, ID: id, ResourceOwner: orgID},
		Events: []eventstore.Pending{{Type: EventOIDCAdded, Payload: OIDCAdded{
			Name: in.Name, StylingType: in.StylingType, AutoRegister: in.AutoRegister, Config: in.Config, ClientSecret: sealed,
		}}},
	})
	if errors.Is(err, ErrNameTaken) {
		return "", nil, apierr.AlreadyExists("IDP-name-taken", "an identity provider named %q already exists in the organization", in.Name)
	}
	if err != nil {
		return "", nil, apierr.FromStore(err, "identity provider "+in.Name)
	}
	return id, evs, nil
}

// UpdateOIDCConfig replaces idp's configuration with cfg. A new issuer or
// client id makes it another provider: every link to the IdP is removed
// (its users link again, by their password), as when it is removed, so
// whoever can repoint a provider never signs in as the users linked to
// it (an organization owner as its IAM owner, say); those users'
// sessions and tokens end with their links. An empty secret
// keeps the stored one, but only for the same issuer and client id: the
// secret is sent to the token endpoint the issuer's discovery names, so
// an admin who could point the provider elsewhere without knowing it
// would receive it (InvalidArgument). When neither the configuration nor
// the secret would change, it is Aborted ("no changes", as ZITADEL).
func (c *Commands) UpdateOIDCConfig(ctx context.Context, editor string, idp *IDP, cfg Config, secret string) ([]eventstore.Event, error) {
	if secret == "" && (cfg.Issuer != idp.Config.Issuer || cfg.ClientID != idp.Config.ClientID) {
		return nil, apierr.InvalidArgument("IDP-secret-required",
			"client_secret: required when the issuer or client id changes (the stored secret goes only to the provider it was set for)")
	}
	p := OIDCConfigChanged{Config: cfg, LinksDropped: !cfg.SameProvider(idp.Config)}
	if secret != "" {
		current, err := Secrets{c.Cipher}.ClientSecret(ctx, idp)
		if err != nil {
			return nil, err
		}
		if subtle.ConstantTimeCompare([]byte(current), []byte(secret)) != 1 {
			if p.ClientSecret, err = (Secrets{c.Cipher}).seal(idp.ID, secret); err != nil {
				return nil, err
			}
		}
	}
	if p.ClientSecret == nil && cfg.Equal(idp.Config) {
		return nil, apierr.Precondition("IDP-no-changes", "the identity provider configuration would not change")
	}
	return c.push(ctx, editor, idp, eventstore.Pending{Type: EventOIDCConfigChanged, Payload: p})
}

// SetTrust trusts the provider's "amr" values, or stops trusting them
// (IAM owners only, see the management rules); Aborted when unchanged.
func (c *Commands) SetTrust(ctx context.Context, editor string, idp *IDP, trustAMR bool) ([]eventstore.Event, error) {
	if idp.TrustAMR == trustAMR {
		return nil, apierr.Precondition("IDP-no-changes", "the identity provider's trust would not change")
	}
	return c.push(ctx, editor, idp, eventstore.Pending{Type: EventTrustChanged, Payload: TrustChanged{TrustAMR: trustAMR}})
}

// Deactivate hides an active IdP from the login; Aborted unless active.
func (c *Commands) Deactivate(ctx context.Context, editor string, idp *IDP) ([]eventstore.Event, error) {
	if idp.State != StateActive {
		return nil, apierr.Precondition("IDP-not-active", "the identity provider is not active")
	}
	return c.push(ctx, editor, idp, eventstore.Pending{Type: EventDeactivated, Payload: struct{}{}})
}

// Reactivate offers an inactive IdP again; Aborted unless inactive.
func (c *Commands) Reactivate(ctx context.Context, editor string, idp *IDP) ([]eventstore.Event, error) {
	if idp.State != StateInactive {
		return nil, apierr.Precondition("IDP-not-inactive", "the identity provider is not inactive")
	}
	return c.push(ctx, editor, idp, eventstore.Pending{Type: EventReactivated, Payload: struct{}{}})
}

// Remove deletes the IdP; it is gone from every query afterwards.
func (c *Commands) Remove(ctx context.Context, editor string, idp *IDP) ([]eventstore.Event, error) {
	return c.push(ctx, editor, idp, eventstore.Pending{Type: EventRemoved, Payload: Removed{Name: idp.Name}})
}

func (c *Commands) push(ctx context.Context, editor string, idp *IDP, p eventstore.Pending) ([]eventstore.Event, error) {
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{Aggregate: idp.Aggregate(), Version: idp.Version, Events: []eventstore.Pending{p}})
	return evs, apierr.FromStore(err, "identity provider")
}
