package clients

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"connectrpc.com/connect"

	"github.com/lestrrat-go/jwx/v3/jwt"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
)

// Method is a client authentication method.
type Method int

// The methods of the seed's "Client authentication methods" table.
const (
	SecretBasic Method = iota + 1
	SecretPost
	None
	PrivateKeyJWT
	// MachineKeyJWT is private_key_jwt by a machine user with one of its
	// keys (iss = sub = its user id), the "client" of the tokens it got by
	// the JWT profile grant. Only revocation accepts it: a machine user
	// may revoke its own tokens (gatehouse logout).
	MachineKeyJWT
)

func (m Method) String() string {
	return [...]string{"", "client_secret_basic", "client_secret_post", "none", "private_key_jwt", "private_key_jwt"}[m]
}

// MachineKeys looks up machine users' keys (the directory's internal API).
type MachineKeys interface {
	GetMachineKey(context.Context, *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error)
}

// AssertionType is the client_assertion_type of private_key_jwt.
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// Credentials are what a request presented; the token endpoint's parser
// fills them once.
type Credentials struct {
	Basic                bool // an Authorization: Basic header was sent
	BasicUser, BasicPass string
	ClientID             string // form client_id
	ClientSecret         string // form client_secret
	Assertion            string // form client_assertion
	AssertionType        string // form client_assertion_type
}

// DecodeBasic returns the client id and secret of the Basic header:
// RFC 6749 §2.3.1 form-urlencodes both before Base64, so "+" is a space
// and a ":" in either arrives as %3A. A malformed escape is
// invalid_request.
func (cr Credentials) DecodeBasic() (id, secret string, err error) {
	id, err1 := url.QueryUnescape(cr.BasicUser)
	secret, err2 := url.QueryUnescape(cr.BasicPass)
	if err1 != nil || err2 != nil {
		return "", "", oauth.New(oauth.InvalidRequest, "malformed Basic credentials")
	}
	return id, secret, nil
}

// Authenticator authenticates clients.
type Authenticator struct {
	Cache      *Cache
	Hasher     *secrets.Hasher
	Assertions *assertion.Verifier
	// RequestObjects verifies request objects (RFC 9101) with the same
	// keys: audience the issuer, iss the client, no sub.
	RequestObjects *assertion.Verifier
	// Machines, when set, lets MachineKeyJWT authenticate machine users.
	Machines MachineKeys
}

// Authenticated is an authenticated client.
type Authenticated struct {
	Client *directoryv1.Client
	Method Method
}

func registered(c *directoryv1.Client) Method {
	switch c.GetAuthMethod() {
	case directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC:
		return SecretBasic
	case directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST:
		return SecretPost
	case directoryv1.AuthMethod_AUTH_METHOD_NONE:
		return None
	case directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT:
		return PrivateKeyJWT
	}
	return 0
}

// Authenticate identifies and authenticates the client by the one method
// the request used, which must be in allowed. Errors are OAuth errors:
// invalid_request for several methods at once or a malformed credential,
// invalid_client for everything else.
func (a *Authenticator) Authenticate(ctx context.Context, cr Credentials, allowed ...Method) (*Authenticated, error) {
	n := 0
	for _, used := range []bool{cr.Basic, cr.ClientSecret != "", cr.Assertion != "" || cr.AssertionType != ""} {
		if used {
			n++
		}
	}
	if n > 1 {
		return nil, oauth.New(oauth.InvalidRequest, "the client used more than one authentication method")
	}
	var method Method
	var id, secret string
	switch {
	case cr.Basic:
		method = SecretBasic
		var err error
		if id, secret, err = cr.DecodeBasic(); err != nil {
			return nil, err
		}
		if cr.ClientID != "" && cr.ClientID != id {
			return nil, oauth.New(oauth.InvalidRequest, "client_id differs from the Basic credentials")
		}
	case cr.ClientSecret != "":
		method, id, secret = SecretPost, cr.ClientID, cr.ClientSecret
	case cr.Assertion != "" || cr.AssertionType != "":
		method = PrivateKeyJWT
		if cr.AssertionType != AssertionType {
			return nil, oauth.New(oauth.InvalidRequest, "client_assertion_type must be %s", AssertionType)
		}
		if cr.Assertion == "" {
			return nil, oauth.New(oauth.InvalidRequest, "client_assertion is missing")
		}
		id = cr.ClientID
		if id == "" {
			// The client is the assertion's issuer; verified below.
			tok, err := jwt.ParseInsecure([]byte(cr.Assertion))
			if err != nil {
				return nil, oauth.InvalidClientError(false, "malformed client assertion")
			}
			id, _ = tok.Issuer()
		}
	default:
		method, id = None, cr.ClientID
	}
	if id == "" {
		return nil, oauth.InvalidClientError(cr.Basic, "client authentication is required")
	}
	failed := func(format string, args ...any) *oauth.Error {
		return oauth.InvalidClientError(cr.Basic, format, args...)
	}
	allowedHere := false
	for _, m := range allowed {
		allowedHere = allowedHere || m == method
	}
	if !allowedHere {
		return nil, failed("%s is not accepted here", method)
	}
	c, err := a.Cache.Get(ctx, id)
	if errors.Is(err, ErrUnknown) && method == PrivateKeyJWT && slices.Contains(allowed, MachineKeyJWT) && a.Machines != nil {
		return a.machine(ctx, cr.Assertion, id, failed)
	}
	if errors.Is(err, ErrUnknown) {
		return nil, failed("client authentication failed")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "client lookup failed").WithCause(err)
	}
	if !c.GetActive() {
		return nil, failed("client authentication failed")
	}
	reg := registered(c)
	// A machine user's secret works with either secret method; an app
	// authenticates only by its registered method.
	machine := c.GetKind() == directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER
	if !(reg == method || (machine && (method == SecretBasic || method == SecretPost))) {
		return nil, failed("the client is not registered for %s", method)
	}
	switch method {
	case SecretBasic, SecretPost:
		if !a.Hasher.Verify(secret, c.GetSecretHash()) {
			// The secret may have been regenerated since we cached it.
			if c, err = a.Cache.Refresh(ctx, id); err != nil || !a.Hasher.Verify(secret, c.GetSecretHash()) || !c.GetActive() {
				return nil, failed("client authentication failed")
			}
		}
	case PrivateKeyJWT:
		if err := a.verifyAssertion(ctx, c, cr.Assertion); err != nil {
			return nil, failed("client assertion invalid").WithCause(err)
		}
	case None:
	}
	return &Authenticated{Client: c, Method: method}, nil
}

// machine authenticates a machine user by an assertion signed with one
// of its keys; the client it returns has the user's id as client id, as
// the JWT profile grant's tokens do.
func (a *Authenticator) machine(ctx context.Context, raw, id string, failed func(string, ...any) *oauth.Error) (*Authenticated, error) {
	kid, err := assertion.KeyID(raw)
	if err != nil {
		return nil, failed("client assertion invalid").WithCause(err)
	}
	res, err := a.Machines.GetMachineKey(ctx, &directoryv1.GetMachineKeyRequest{KeyId: kid})
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil, failed("client authentication failed")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "client lookup failed").WithCause(err)
	}
	k, user := res.GetKey(), res.GetUser()
	if user.GetId() != id || !user.GetMachine() || user.GetState() != directoryv1.UserState_USER_STATE_ACTIVE {
		return nil, failed("client authentication failed")
	}
	key := assertion.Key{ID: k.GetKeyId(), PEM: k.GetPublicKeyPem()}
	if k.GetExpiresAt() != nil {
		t := k.GetExpiresAt().AsTime()
		key.ExpiresAt = &t
	}
	if _, err := a.Assertions.Verify(ctx, raw, key, user.GetId()); err != nil {
		if errors.Is(err, assertion.ErrInvalid) {
			return nil, failed("client assertion invalid").WithCause(err)
		}
		return nil, oauth.New(oauth.TemporarilyUnavailable, "client assertion check failed").WithCause(err)
	}
	return &Authenticated{Method: MachineKeyJWT, Client: &directoryv1.Client{
		ClientId: user.GetId(), Kind: directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER, Id: user.GetId(), OrgId: user.GetOrgId(), Active: true,
	}}, nil
}

func (a *Authenticator) verifyAssertion(ctx context.Context, c *directoryv1.Client, raw string) error {
	return a.verifyJWT(ctx, c, raw, a.Assertions)
}

// verifyJWT verifies raw with v and the client's registered key its kid
// names.
func (a *Authenticator) verifyJWT(ctx context.Context, c *directoryv1.Client, raw string, v *assertion.Verifier) error {
	kid, err := assertion.KeyID(raw)
	if err != nil {
		return err
	}
	for _, k := range c.GetKeys() {
		if k.GetKeyId() != kid {
			continue
		}
		key := assertion.Key{ID: k.GetKeyId(), PEM: k.GetPublicKeyPem()}
		if k.GetExpiresAt() != nil {
			t := k.GetExpiresAt().AsTime()
			key.ExpiresAt = &t
		}
		claims, err := v.Verify(ctx, raw, key, c.GetClientId())
		if err != nil {
			return err
		}
		if claims.JTI == "" {
			return errors.New("client assertion without jti")
		}
		return nil
	}
	return fmt.Errorf("%w: unknown key id %s", assertion.ErrInvalid, kid)
}
