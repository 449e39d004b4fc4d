// Package auth obtains, refreshes and revokes the CLI's tokens: a machine
// user signs in with its key file (RFC 7523 JWT profile grant), a person
// through the browser (authorization code + PKCE on a loopback redirect,
// RFC 8252) with the native admin app Gatehouse creates at first start.
package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// ManagementScope asks for the management API's audience.
const ManagementScope = "urn:gatehouse:iam:org:project:id:gatehouse:aud"

// ResourceOwnerScope adds the user's organization (id, name, primary
// domain) to userinfo: gatehouse whoami shows it even to a user without
// the roles the management API asks for.
const ResourceOwnerScope = "urn:gatehouse:iam:user:resourceowner"

// Scopes of the CLI's sessions, the offline_access of a browser sign-in
// aside.
const sessionScopes = "openid profile " + ResourceOwnerScope + " " + ManagementScope

// CLIClientID is the native admin app Gatehouse creates for the CLI.
const CLIClientID = "gatehouse-cli"

// KeyFile is a machine user's key file as Gatehouse (and ZITADEL) write it.
type KeyFile struct {
	Type   string `json:"type"`
	KeyID  string `json:"keyId"`
	Key    string `json:"key"`
	UserID string `json:"userId"`
}

// ParseKeyFile reads a key file and checks that it can sign.
func ParseKeyFile(raw []byte) (*KeyFile, jwk.Key, error) {
	var kf KeyFile
	if err := json.Unmarshal(raw, &kf); err != nil {
		return nil, nil, fmt.Errorf("key file: not JSON: %w", err)
	}
	if kf.Type != "serviceaccount" || kf.KeyID == "" || kf.UserID == "" || kf.Key == "" {
		return nil, nil, errors.New(`key file: want {"type":"serviceaccount","keyId":…,"key":…,"userId":…}`)
	}
	key, err := jwk.ParseKey([]byte(kf.Key), jwk.WithPEM(true))
	if err != nil {
		return nil, nil, fmt.Errorf("key file: the key: %w", err)
	}
	return &kf, key, nil
}

// Token is what the token endpoint answered.
type Token struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token,omitempty"`
	IDToken      string `json:"id_token,omitempty"`
	ExpiresIn    int64  `json:"expires_in"`
	Expiry       time.Time
}

// Client talks to one issuer's OAuth endpoints.
type Client struct {
	Issuer string
	HTTP   *http.Client
	Now    func() time.Time
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) endpoint(path string) string { return strings.TrimRight(c.Issuer, "/") + path }

// assertion signs a JWT with the key file's key: iss = sub = the user, aud
// = the issuer, as the JWT profile and private_key_jwt both take it.
func (c *Client) assertion(kf *KeyFile, key jwk.Key) (string, error) {
	now := c.now()
	tok, err := jwt.NewBuilder().Issuer(kf.UserID).Subject(kf.UserID).Audience([]string{c.Issuer}).
		IssuedAt(now).Expiration(now.Add(5 * time.Minute)).JwtID(secrets.RandomToken(16)).Build()
	if err != nil {
		return "", fmt.Errorf("assertion: %w", err)
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.KeyIDKey, kf.KeyID); err != nil {
		return "", fmt.Errorf("assertion: %w", err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("assertion: sign: %w", err)
	}
	return string(signed), nil
}

// KeyLogin runs the JWT profile grant (RFC 7523 §2.1) for the management API.
func (c *Client) KeyLogin(ctx context.Context, rawKeyFile []byte) (*Token, error) {
	kf, key, err := ParseKeyFile(rawKeyFile)
	if err != nil {
		return nil, err
	}
	a, err := c.assertion(kf, key)
	if err != nil {
		return nil, err
	}
	return c.token(ctx, url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {a},
		"scope":      {sessionScopes},
	})
}

// Refresh uses a refresh token of the CLI's native app.
func (c *Client) Refresh(ctx context.Context, clientID, refreshToken string) (*Token, error) {
	return c.token(ctx, url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {refreshToken},
		"client_id":     {clientID},
	})
}

// Exchange redeems an authorization code with its PKCE verifier.
func (c *Client) Exchange(ctx context.Context, clientID, code, redirectURI, verifier string) (*Token, error) {
	return c.token(ctx, url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"client_id":     {clientID},
		"code_verifier": {verifier},
	})
}

// OAuthError is an error response of an OAuth endpoint.
type OAuthError struct {
	Status      int
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *OAuthError) Error() string {
	if e.Description == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Description, e.Status)
}

func (c *Client) post(ctx context.Context, path string, form url.Values) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(path), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		e := &OAuthError{Status: res.StatusCode}
		if json.Unmarshal(body, e) != nil || e.Code == "" {
			e.Code = "unexpected_response"
		}
		return nil, e
	}
	return body, nil
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) token(ctx context.Context, form url.Values) (*Token, error) {
	body, err := c.post(ctx, "/oauth/v2/token", form)
	if err != nil {
		return nil, err
	}
	var t Token
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return nil, errors.New("token endpoint: no access_token in the response")
	}
	t.Expiry = c.now().Add(time.Duration(t.ExpiresIn) * time.Second)
	return &t, nil
}

// RevokePublic revokes a token of a public client (the native app).
func (c *Client) RevokePublic(ctx context.Context, clientID, token, hint string) error {
	_, err := c.post(ctx, "/oauth/v2/revoke", url.Values{"token": {token}, "token_type_hint": {hint}, "client_id": {clientID}})
	return err
}

// RevokeWithKey revokes a machine user's token, authenticating with its
// key (private_key_jwt).
func (c *Client) RevokeWithKey(ctx context.Context, rawKeyFile []byte, token string) error {
	kf, key, err := ParseKeyFile(rawKeyFile)
	if err != nil {
		return err
	}
	a, err := c.assertion(kf, key)
	if err != nil {
		return err
	}
	_, err = c.post(ctx, "/oauth/v2/revoke", url.Values{
		"token": {token}, "token_type_hint": {"access_token"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {a},
	})
	return err
}

// UserInfo returns the claims of the userinfo endpoint.
func (c *Client) UserInfo(ctx context.Context, accessToken string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint("/oidc/v1/userinfo"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	res, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("userinfo: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("userinfo: HTTP %d", res.StatusCode)
	}
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("userinfo: %w", err)
	}
	return m, nil
}
