package projects

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
)

// Commands produces project events. Errors are management API errors
// (apierr); inputs are validated by the caller (Validate, ParsePublicKey).
type Commands struct {
	ES *eventstore.Store
	// Hasher hashes client secrets; only the hash is stored.
	Hasher *secrets.Hasher
}

// storeErr translates Push errors: a taken name is AlreadyExists.
func storeErr(err error, id, what string) error {
	if errors.Is(err, ErrNameTaken) {
		return apierr.AlreadyExists(id, "%s already exists", what)
	}
	return apierr.FromStore(err, what)
}

// AddProject creates a project in org and returns its id and events.
func (c *Commands) AddProject(ctx context.Context, editor, orgID string, p ProjectAdded) (string, []eventstore.Event, error) {
	id := secrets.NewID()
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: eventstore.Aggregate{Type: Aggregate, ID: id, ResourceOwner: orgID},
		Events:    []eventstore.Pending{{Type: EventAdded, Payload: p}},
	})
	if err != nil {
		return "", nil, storeErr(err, "PROJECT-name-taken", "project "+p.Name)
	}
	return id, evs, nil
}

// NewApp is a created app with its credentials; Secret is set only for
// auth methods using one and is never stored.
type NewApp struct {
	ID, ClientID, Secret string
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// clientID makes "<id>@<project slug>" like ZITADEL's client ids, with the
// project name reduced to [a-z0-9-] so the id needs no escaping in forms
// and Basic credentials beyond '@'.
func clientID(projectName string) string {
	slug := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(projectName), "-"), "-")
	if len(slug) > 50 {
		slug = strings.TrimRight(slug[:50], "-")
	}
	if slug == "" {
		slug = "project"
	}
	return secrets.NewID() + "@" + slug
}

// AddOIDCApp adds an OIDC application to p with a normalized, validated
// configuration, generating a client secret for BASIC and POST.
func (c *Commands) AddOIDCApp(ctx context.Context, editor string, p *Project, name string, cfg OIDCConfig) (*NewApp, []eventstore.Event, error) {
	return c.addApp(ctx, editor, p, appAdded{Name: name, Kind: KindOIDC, OIDC: &cfg}, MethodUsesSecret(cfg.AuthMethod))
}

// AddAPIApp adds an API application to p, generating a client secret for
// BASIC.
func (c *Commands) AddAPIApp(ctx context.Context, editor string, p *Project, name string, cfg APIConfig) (*NewApp, []eventstore.Event, error) {
	return c.addApp(ctx, editor, p, appAdded{Name: name, Kind: KindAPI, API: &cfg}, cfg.AuthMethod == AuthBasic)
}

func (c *Commands) addApp(ctx context.Context, editor string, p *Project, ev appAdded, withSecret bool) (*NewApp, []eventstore.Event, error) {
	out := &NewApp{ID: secrets.NewID(), ClientID: clientID(p.Name)}
	ev.AppID, ev.ClientID = out.ID, out.ClientID
	if withSecret {
		out.Secret = secrets.RandomToken(SecretRandBytes)
		ev.SecretHash = c.Hasher.Hash(out.Secret)
	}
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventAppAdded, Payload: ev}},
	})
	if err != nil {
		return nil, nil, storeErr(err, "APP-name-taken", "application "+ev.Name)
	}
	return out, evs, nil
}

// ChangeOIDCConfig replaces an OIDC app's configuration; the client id and
// secret stay. An identical configuration is Aborted (nothing to change).
func (c *Commands) ChangeOIDCConfig(ctx context.Context, editor string, p *Project, a *App, cfg OIDCConfig) ([]eventstore.Event, error) {
	if a.OIDC == nil {
		return nil, apierr.NotFound("APP-not-oidc", "OIDC application not found")
	}
	if a.OIDC.Equal(&cfg) {
		return nil, apierr.Precondition("APP-config-unchanged", "the OIDC configuration is unchanged")
	}
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventOIDCConfigChanged, Payload: oidcConfigChanged{AppID: a.ID, Config: cfg}}},
	})
	return evs, apierr.FromStore(err, "application")
}

// RegenerateSecret replaces the client secret of an OIDC app whose auth
// method uses one and returns the new secret (shown once).
func (c *Commands) RegenerateSecret(ctx context.Context, editor string, p *Project, a *App) (string, []eventstore.Event, error) {
	if a.OIDC == nil {
		return "", nil, apierr.NotFound("APP-not-oidc", "OIDC application not found")
	}
	if !a.UsesSecret() {
		return "", nil, apierr.Precondition("APP-no-secret-method", "auth method %s uses no client secret", a.AuthMethod())
	}
	secret := secrets.RandomToken(SecretRandBytes)
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventAppSecretChanged, Payload: secretChanged{AppID: a.ID, SecretHash: c.Hasher.Hash(secret)}}},
	})
	if err != nil {
		return "", nil, apierr.FromStore(err, "application")
	}
	return secret, evs, nil
}

// SetAdminClient marks (or unmarks) an app as an admin client. Marking
// makes the app's credentials the instance's: whoever holds them now (the
// organization that created the app) must not receive IAM owners'
// management tokens, so in the same push the client secret is replaced
// (the new one is returned, shown once) and every key is removed.
func (c *Commands) SetAdminClient(ctx context.Context, editor string, p *Project, a *App, admin bool) (secret string, evs []eventstore.Event, err error) {
	var pending []eventstore.Pending
	if admin && !a.AdminClient {
		keys, err := (&Queries{DB: c.ES.DB()}).Keys(ctx, a.ID)
		if err != nil {
			return "", nil, err
		}
		for _, k := range keys {
			pending = append(pending, eventstore.Pending{Type: EventAppKeyRemoved, Payload: keyRemoved{AppID: a.ID, KeyID: k.ID}})
		}
		if a.UsesSecret() {
			secret = secrets.RandomToken(SecretRandBytes)
			pending = append(pending, eventstore.Pending{Type: EventAppSecretChanged, Payload: secretChanged{AppID: a.ID, SecretHash: c.Hasher.Hash(secret)}})
		}
	}
	pending = append(pending, eventstore.Pending{Type: EventAppAdminClientSet, Payload: adminClientSet{AppID: a.ID, AdminClient: admin}})
	evs, err = c.ES.Push(ctx, editor, eventstore.Command{Aggregate: p.Aggregate(), Version: p.Version, Events: pending})
	if err != nil {
		return "", nil, apierr.FromStore(err, "application")
	}
	return secret, evs, nil
}

// AddKey registers a public key for an app using private_key_jwt.
// publicPEM is the output of ParsePublicKey, or "" to generate a key pair:
// then keyFile is the JSON key file with the private key (shown once).
// expiration nil means the key does not expire.
func (c *Commands) AddKey(ctx context.Context, editor string, p *Project, a *App, publicPEM string, expiration *time.Time) (keyID string, keyFile []byte, evs []eventstore.Event, err error) {
	if a.AuthMethod() != AuthPrivateKeyJWT {
		return "", nil, nil, apierr.Precondition("APP-not-private-key-jwt", "keys are only for applications with auth method private_key_jwt")
	}
	if expiration != nil {
		// The precision both databases keep, so event and projection agree.
		t := expiration.UTC().Truncate(time.Microsecond)
		expiration = &t
	}
	keyID = secrets.NewID()
	if publicPEM == "" {
		priv, pub, err := generateKey()
		if err != nil {
			return "", nil, nil, err
		}
		publicPEM = pub
		if keyFile, err = (KeyFile{Type: "application", KeyID: keyID, Key: priv, AppID: a.ID, ClientID: a.ClientID}).marshal(); err != nil {
			return "", nil, nil, err
		}
	}
	evs, err = c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events: []eventstore.Pending{{Type: EventAppKeyAdded, Payload: keyAdded{
			AppID: a.ID, KeyID: keyID, Type: KeyTypeJSON, PublicKey: publicPEM, Expiration: expiration,
		}}},
	})
	if err != nil {
		return "", nil, nil, apierr.FromStore(err, "application key")
	}
	return keyID, keyFile, evs, nil
}

// RemoveKey removes a key of an app; it must exist (NotFound otherwise).
func (c *Commands) RemoveKey(ctx context.Context, editor string, p *Project, a *App, k *Key) ([]eventstore.Event, error) {
	evs, err := c.ES.Push(ctx, editor, eventstore.Command{
		Aggregate: p.Aggregate(),
		Version:   p.Version,
		Events:    []eventstore.Pending{{Type: EventAppKeyRemoved, Payload: keyRemoved{AppID: a.ID, KeyID: k.ID}}},
	})
	return evs, apierr.FromStore(err, "application key")
}
