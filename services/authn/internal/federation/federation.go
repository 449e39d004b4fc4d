// Package federation is Gatehouse as the relying party of an
// organization's external OpenID Connect identity providers: discovery
// (cached, and the document's issuer must equal the configured one), the
// authorization code flow with PKCE S256, nonce and state, the
// authorization response's issuer (RFC 9207), client
// authentication by client_secret_basic (client_secret_post when the
// provider's discovery lists only that), ID token verification (signature
// through the provider's key set, iss, aud, exp, nonce) and userinfo when
// the ID token lacks a claim. Every call goes through a netguard client,
// so an organization owner cannot point Gatehouse at internal addresses.
package federation

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/maypok86/otter/v2"
	"golang.org/x/oauth2"

	"github.com/gatehouse-id/gatehouse/pkg/cache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// Errors of a sign-in at an identity provider, for the error page.
var (
	// ErrUnavailable: discovery, the key set or the token endpoint could
	// not be reached, or discovery is invalid (issuer mismatch included).
	ErrUnavailable = errors.New("federation: identity provider unavailable or misconfigured")
	// ErrRejected: the token endpoint refused the code or the client.
	ErrRejected = errors.New("federation: identity provider refused the sign-in")
	// ErrInvalidToken: the ID token failed verification (signature, iss,
	// aud, exp or nonce) or lacks a subject.
	ErrInvalidToken = errors.New("federation: invalid ID token from the identity provider")
	// ErrMixUp: the authorization response names another issuer, or none
	// from a provider that promises to (RFC 9207): the code may be
	// another provider's, so it is never sent anywhere.
	ErrMixUp = errors.New("federation: the authorization response is not from the identity provider")
)

// discoveryTTL is how long a provider's discovery document is reused.
const discoveryTTL = 10 * time.Minute

// RP is the relying party. It is safe for concurrent use.
type RP struct {
	// HTTP makes every call to identity providers (a netguard client).
	HTTP *http.Client
	// RedirectURL is {issuer}/idps/callback, registered at every IdP.
	RedirectURL string
	Now         func() time.Time

	once      sync.Once
	providers *otter.Cache[string, cachedProvider]
}

// maxProviders bounds the discovered providers kept (one per issuer an IdP
// names).
const maxProviders = 1000

type cachedProvider struct {
	p       *oidc.Provider
	methods []string
	// issParam: discovery promises iss in authorization responses.
	issParam bool
	fetched  time.Time
}

func (rp *RP) now() time.Time {
	if rp.Now != nil {
		return rp.Now()
	}
	return time.Now()
}

func (rp *RP) ctx(ctx context.Context) context.Context { return oidc.ClientContext(ctx, rp.HTTP) }

// provider returns the discovered provider of issuer, from the cache while
// fresh. go-oidc refuses a document whose issuer differs.
func (rp *RP) provider(ctx context.Context, issuer string) (cachedProvider, error) {
	rp.once.Do(func() {
		rp.providers = cache.New(cache.Options[string, cachedProvider]{Name: "authn_idp_discovery", Size: maxProviders, Now: rp.Now,
			ExpiresAt: func(_ string, c cachedProvider) time.Time { return c.fetched.Add(discoveryTTL) }})
	})
	c, ok := rp.providers.GetIfPresent(issuer)
	if ok && rp.now().Sub(c.fetched) < discoveryTTL {
		return c, nil
	}
	p, err := oidc.NewProvider(rp.ctx(ctx), issuer)
	if err != nil {
		return cachedProvider{}, fmt.Errorf("%w: discovery of %s: %v", ErrUnavailable, issuer, err)
	}
	var meta struct {
		Methods  []string `json:"token_endpoint_auth_methods_supported"`
		IssParam bool     `json:"authorization_response_iss_parameter_supported"`
	}
	_ = p.Claims(&meta)
	c = cachedProvider{p: p, methods: meta.Methods, issParam: meta.IssParam, fetched: rp.now()}
	rp.providers.Set(issuer, c)
	return c, nil
}

func (rp *RP) config(c cachedProvider, idp *directoryv1.IdP, secret string) *oauth2.Config {
	ep := c.p.Endpoint()
	// client_secret_basic unless discovery lists only client_secret_post.
	if len(c.methods) > 0 && !slices.Contains(c.methods, "client_secret_basic") && slices.Contains(c.methods, "client_secret_post") {
		ep.AuthStyle = oauth2.AuthStyleInParams
	} else {
		ep.AuthStyle = oauth2.AuthStyleInHeader
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, s := range idp.GetScopes() {
		if s != oidc.ScopeOpenID && !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return &oauth2.Config{ClientID: idp.GetClientId(), ClientSecret: secret, Endpoint: ep, RedirectURL: rp.RedirectURL, Scopes: scopes}
}

// Start is the beginning of a sign-in: where to send the browser, and the
// secrets to keep for the callback.
type Start struct {
	URL      string
	State    string
	Nonce    string
	Verifier string
}

// Begin prepares the redirect to idp's authorization endpoint.
func (rp *RP) Begin(ctx context.Context, idp *directoryv1.IdP, secret string) (Start, error) {
	c, err := rp.provider(ctx, idp.GetIssuer())
	if err != nil {
		return Start{}, err
	}
	s := Start{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier()}
	s.URL = rp.config(c, idp, secret).AuthCodeURL(s.State, oidc.Nonce(s.Nonce), oauth2.S256ChallengeOption(s.Verifier))
	return s, nil
}

// AMRFederated is the "amr" value of a sign-in at an external identity
// provider: Gatehouse verified that provider's ID token, nothing more.
// RFC 8176 registers no value for it; this private one is documented in
// the README.
const AMRFederated = "fed"

// AMR is what Gatehouse records of a sign-in at idp: AMRFederated, then
// the provider's own values only when an IAM owner trusts them (an
// organization owner configures the provider, and a relying party that
// requires "mfa" must not trust every provider a tenant adds).
func AMR(idp *directoryv1.IdP, id *Identity) []string {
	out := []string{AMRFederated}
	if !idp.GetTrustAmr() {
		return out
	}
	for _, v := range id.AMR {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Identity is what an identity provider says about the user.
type Identity struct {
	Subject           string
	PreferredUsername string
	Email             string
	EmailVerified     bool
	Name              string
	GivenName         string
	FamilyName        string
	Locale            string
	AMR               []string
}

type claims struct {
	PreferredUsername string   `json:"preferred_username"`
	Email             string   `json:"email"`
	EmailVerified     any      `json:"email_verified"`
	Name              string   `json:"name"`
	GivenName         string   `json:"given_name"`
	FamilyName        string   `json:"family_name"`
	Locale            string   `json:"locale"`
	AMR               []string `json:"amr"`
}

// verified reads email_verified, which some providers send as a string.
func verified(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x == "true"
	}
	return false
}

// Finish checks the authorization response's issuer (RFC 9207: when it
// names one, and always when discovery promises it), exchanges its code
// (with the PKCE verifier), verifies the ID token and its nonce, and reads
// userinfo when the ID token lacks a claim the mappings use.
func (rp *RP) Finish(ctx context.Context, idp *directoryv1.IdP, secret string, response url.Values, verifier, nonce string) (*Identity, error) {
	c, err := rp.provider(ctx, idp.GetIssuer())
	if err != nil {
		return nil, err
	}
	if (response.Has("iss") || c.issParam) && response.Get("iss") != idp.GetIssuer() {
		return nil, fmt.Errorf("%w: iss %q, want %q", ErrMixUp, response.Get("iss"), idp.GetIssuer())
	}
	cfg := rp.config(c, idp, secret)
	tok, err := cfg.Exchange(rp.ctx(ctx), response.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return nil, fmt.Errorf("%w: token endpoint: %s", ErrRejected, re.ErrorCode)
		}
		return nil, fmt.Errorf("%w: token endpoint: %v", ErrUnavailable, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fmt.Errorf("%w: no id_token in the token response", ErrInvalidToken)
	}
	idt, err := c.p.Verifier(&oidc.Config{ClientID: idp.GetClientId(), Now: rp.now}).Verify(rp.ctx(ctx), raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if idt.Nonce != nonce || idt.Subject == "" {
		return nil, fmt.Errorf("%w: nonce or subject mismatch", ErrInvalidToken)
	}
	var cl claims
	if err := idt.Claims(&cl); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrInvalidToken, err)
	}
	if cl.PreferredUsername == "" || cl.Email == "" || cl.Name == "" {
		if ui, err := c.p.UserInfo(rp.ctx(ctx), oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			var more claims
			if ui.Claims(&more) == nil {
				fill := func(dst *string, v string) {
					if *dst == "" {
						*dst = v
					}
				}
				fill(&cl.PreferredUsername, more.PreferredUsername)
				fill(&cl.Name, more.Name)
				fill(&cl.GivenName, more.GivenName)
				fill(&cl.FamilyName, more.FamilyName)
				if cl.Email == "" {
					cl.Email, cl.EmailVerified = more.Email, more.EmailVerified
				}
			}
		}
	}
	return &Identity{Subject: idt.Subject, PreferredUsername: cl.PreferredUsername, Email: cl.Email,
		EmailVerified: verified(cl.EmailVerified), Name: cl.Name, GivenName: cl.GivenName, FamilyName: cl.FamilyName,
		Locale: cl.Locale, AMR: cl.AMR}, nil
}

// UserName maps an identity to a Gatehouse user name by the IdP's
// usernameMapping: preferred_username or email; unspecified means
// preferred_username, falling back to email.
func UserName(idp *directoryv1.IdP, id *Identity) string {
	switch idp.GetUsernameMapping() {
	case directoryv1.MappingField_MAPPING_FIELD_EMAIL:
		return id.Email
	case directoryv1.MappingField_MAPPING_FIELD_PREFERRED_USERNAME:
		return id.PreferredUsername
	}
	if id.PreferredUsername != "" {
		return id.PreferredUsername
	}
	return id.Email
}

// DisplayName maps the display name by displayNameMapping: unspecified
// means the name claim, falling back to the user name.
func DisplayName(idp *directoryv1.IdP, id *Identity) string {
	switch idp.GetDisplayNameMapping() {
	case directoryv1.MappingField_MAPPING_FIELD_EMAIL:
		return id.Email
	case directoryv1.MappingField_MAPPING_FIELD_PREFERRED_USERNAME:
		return id.PreferredUsername
	}
	if id.Name != "" {
		return id.Name
	}
	return UserName(idp, id)
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
