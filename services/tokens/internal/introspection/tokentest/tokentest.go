// Package tokentest builds, for tests of the introspection, revocation and
// userinfo endpoints, the real token stack on a real database: a tokens
// database (SQLite or PostgreSQL, via keys/keytest), a signing key manager,
// the record store, the revocation list (memory, or Redis when asked), the
// Validator, the Minter that issues the tokens, and a client Authenticator
// over a table-backed fake of the directory's internal API.
package tokentest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// Issuer is the tests' issuer.
const Issuer = "https://id.example.test"

// Options vary an Env.
type Options struct {
	// Algorithm of the signing keys (default RS256).
	Algorithm string
	// RedisURL and RedisPrefix put the revocation list in Redis.
	RedisURL, RedisPrefix string
}

// Env is the token stack on one database.
type Env struct {
	Dialect   db.Dialect
	DB        *db.DB
	Clock     *keytest.Clock
	Keys      *keys.Manager
	Store     *store.Store
	Hasher    *secrets.Hasher
	Revoked   *revocation.List
	Validator *accesstoken.Verifier
	Minter    *mint.Minter
	Dir       *Directory
	Auth      *clients.Authenticator
}

// New builds an Env on a fresh database of dialect d; everything is closed
// when the test ends.
func New(t testing.TB, d db.Dialect, o Options) *Env {
	t.Helper()
	if o.Algorithm == "" {
		o.Algorithm = keys.RS256
	}
	e := &Env{Dialect: d, Clock: keytest.NewClock(time.Now().UTC().Truncate(time.Second)), Dir: NewDirectory()}
	e.DB = keytest.Open(t, keytest.DBOptions(t, d))
	e.Keys = keytest.Manager(t, e.DB, keytest.Options(o.Algorithm, e.Clock))
	var err error
	if e.Hasher, err = secrets.NewHasher(keytest.MasterKey); err != nil {
		t.Fatal(err)
	}
	e.Revoked, err = revocation.New(e.DB, revocation.Options{RedisURL: o.RedisURL, Prefix: o.RedisPrefix, Logger: keytest.Quiet, Now: e.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Revoked.Close() })
	e.Store = &store.Store{DB: e.DB}
	e.Validator = introspection.NewVerifier(Issuer, e.Keys, e.Store, e.Hasher, e.Revoked, e.Clock.Now)
	e.Minter = &mint.Minter{Issuer: Issuer, Signer: e.Keys, Hasher: e.Hasher, Store: e.Store,
		AccessTTL: 15 * time.Minute, IDTTL: 15 * time.Minute, Now: e.Clock.Now}
	e.Auth = &clients.Authenticator{
		Cache:  clients.NewCache(e.Dir, &dircache.Watcher{Now: e.Clock.Now}),
		Hasher: e.Hasher,
		Assertions: &assertion.Verifier{Audiences: []string{Issuer, Issuer + "/oauth/v2/token"},
			Replay: e.Store, Now: e.Clock.Now},
	}
	return e
}

// Access issues an access token for client c (a JWT or opaque per jwt) to
// subject with scopes; aud is the client_id, the client's project and each
// reserved-scope project, as the token endpoint builds it.
func (e *Env) Access(t testing.TB, c *directoryv1.Client, subject string, jwt bool, scopes ...string) *mint.Issued {
	t.Helper()
	aud := []string{c.GetClientId()}
	if c.GetProjectId() != "" {
		aud = append(aud, c.GetProjectId())
	}
	return e.AccessWithAudience(t, c.GetClientId(), subject, jwt, aud, scopes...)
}

// AccessWithAudience issues an access token with an explicit audience.
func (e *Env) AccessWithAudience(t testing.TB, clientID, subject string, jwt bool, aud []string, scopes ...string) *mint.Issued {
	t.Helper()
	at, err := e.Minter.AccessToken(context.Background(), nil, mint.Access{
		ClientID: clientID, Subject: subject, OrgID: "org-1", Scopes: scopes, Audience: aud, JWT: jwt,
	})
	if err != nil {
		t.Fatalf("mint access token: %v", err)
	}
	return at
}

// Client is a registered client and what it authenticates with.
type Client struct {
	*directoryv1.Client
	Secret string            // for secret methods
	Key    *ecdsa.PrivateKey // for private_key_jwt
	KeyID  string
}

// AddClient registers a client of kind with method; a secret or key pair
// is generated for the method.
func (e *Env) AddClient(t testing.TB, clientID, projectID string, kind directoryv1.ClientKind, method directoryv1.AuthMethod) *Client {
	t.Helper()
	c := &Client{Client: &directoryv1.Client{
		ClientId: clientID, Kind: kind, Id: "id-" + clientID, ProjectId: projectID, OrgId: "org-1",
		Active: true, AuthMethod: method,
	}}
	switch method {
	case directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC, directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST:
		c.Secret = secrets.RandomToken(32)
		c.SecretHash = e.Hasher.Hash(c.Secret)
	case directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		c.Key, c.KeyID = k, "kid-"+clientID
		c.Keys = []*directoryv1.PublicKey{{KeyId: c.KeyID,
			PublicKeyPem: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}}
	}
	e.Dir.PutClient(c.Client)
	return c
}

// Assertion returns a fresh client assertion (private_key_jwt) of c, valid
// at the Env's clock, for audience aud (the issuer when empty).
func (e *Env) Assertion(t testing.TB, c *Client, aud string) string {
	t.Helper()
	if aud == "" {
		aud = Issuer
	}
	now := e.Clock.Now()
	tok, err := jwt.NewBuilder().Issuer(c.GetClientId()).Subject(c.GetClientId()).Audience([]string{aud}).
		IssuedAt(now).Expiration(now.Add(time.Minute)).JwtID(secrets.NewID()).Build()
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jwk.KeyIDKey, c.KeyID); err != nil {
		t.Fatal(err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), c.Key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}

// User is a directory user: its login name and its claims per scope.
type User struct {
	ID        string
	LoginName string
	// Claims per scope: GetClaims returns sub plus the claims of every
	// granted scope listed here.
	Claims map[string]map[string]any
	// Gone makes GetClaims answer FailedPrecondition (deactivated).
	Gone bool
}

// Directory is a table-backed fake of the directory's GetClient and
// GetClaims.
type Directory struct {
	mu        sync.Mutex
	clients   map[string]*directoryv1.Client
	users     map[string]*User
	claimsErr error // returned by every GetClaims while set
	clientErr error // returned by every GetClient while set
	claims    int   // GetClaims calls
}

var (
	_ clients.Directory    = (*Directory)(nil)
	_ introspection.Claims = (*Directory)(nil)
)

// NewDirectory returns an empty directory.
func NewDirectory() *Directory {
	return &Directory{clients: map[string]*directoryv1.Client{}, users: map[string]*User{}}
}

// PutClient adds or replaces a client.
func (d *Directory) PutClient(c *directoryv1.Client) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clients[c.GetClientId()] = c
}

// PutUser adds or replaces a user.
func (d *Directory) PutUser(u *User) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users[u.ID] = u
}

// DeleteUser removes a user.
func (d *Directory) DeleteUser(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.users, id)
}

// FailClaims makes GetClaims fail with err (nil restores it).
func (d *Directory) FailClaims(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.claimsErr = err
}

// FailClients makes GetClient fail with err (nil restores it).
func (d *Directory) FailClients(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clientErr = err
}

// ClaimsCalls counts GetClaims calls.
func (d *Directory) ClaimsCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.claims
}

// GetClient implements the directory's GetClient.
func (d *Directory) GetClient(_ context.Context, req *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.clientErr != nil {
		return nil, d.clientErr
	}
	c, ok := d.clients[req.GetClientId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("client not found"))
	}
	return &directoryv1.GetClientResponse{Client: c}, nil
}

// GetClaims implements the directory's GetClaims.
func (d *Directory) GetClaims(_ context.Context, req *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.claims++
	if d.claimsErr != nil {
		return nil, d.claimsErr
	}
	u, ok := d.users[req.GetUserId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("user not found"))
	}
	if u.Gone {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("user deactivated"))
	}
	claims := map[string]any{"sub": u.ID}
	for _, s := range slices.Sorted(maps.Keys(u.Claims)) {
		if slices.Contains(req.GetScopes(), s) {
			maps.Copy(claims, u.Claims[s])
		}
	}
	st, err := structpb.NewStruct(claims)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return &directoryv1.GetClaimsResponse{Claims: st, PreferredLoginName: u.LoginName}, nil
}

// Alice is a human user with profile, email and phone claims.
func Alice() *User {
	return &User{ID: "user-alice", LoginName: "alice@example.test", Claims: map[string]map[string]any{
		"profile": {"name": "Alice Liddell", "given_name": "Alice", "family_name": "Liddell", "preferred_username": "alice@example.test"},
		"email":   {"email": "alice@example.test", "email_verified": true},
		"phone":   {"phone_number": "+41 44 123 45 67", "phone_number_verified": false},
		"urn:gatehouse:iam:user:resourceowner": {
			"urn:gatehouse:iam:user:resourceowner:id":   "org-1",
			"urn:gatehouse:iam:user:resourceowner:name": "Example",
		},
	}}
}
