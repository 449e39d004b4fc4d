// Package device is the device authorization endpoint, POST
// /oauth/v2/device_authorization (RFC 8628 §3.1, §3.2). It authenticates
// the client as the token endpoint does (any of the four methods; a public
// client sends its client_id), requires an active OIDC application that
// registered the device_code grant, checks the requested scopes against
// what the client may ask for (the reserved scopes' table), and answers
// the device code, the user code the person types at {issuer}/device,
// both verification URIs, the lifetime and the polling interval. The
// person approves at the /device pages (authn); the device polls the
// token endpoint (lifecycle.ExchangeDeviceCode).
package device

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Path is the device authorization endpoint; VerificationPath is the page
// where the person enters the user code (authn).
const (
	Path             = "/oauth/v2/device_authorization"
	VerificationPath = "/device"
)

// ClientAuthenticator authenticates the calling client (clients.Authenticator).
type ClientAuthenticator interface {
	Authenticate(ctx context.Context, cr clients.Credentials, allowed ...clients.Method) (*clients.Authenticated, error)
}

// Starter records device authorizations (lifecycle.Lifecycle).
type Starter interface {
	StartDevice(ctx context.Context, c *directoryv1.Client, scopes []string) (*lifecycle.DeviceStart, error)
}

// Endpoint is POST /oauth/v2/device_authorization.
type Endpoint struct {
	Issuer string
	Auth   ClientAuthenticator
	Start  Starter
	Logger *slog.Logger
}

// Response is RFC 8628 §3.2's.
type Response struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int64  `json:"expires_in"`
	Interval                int64  `json:"interval"`
}

// ServeHTTP implements the endpoint.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := e.start(r)
	if err != nil {
		oauth.Write(w, r, e.Logger, "device authorization", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	_ = json.NewEncoder(w).Encode(res)
}

func (e *Endpoint) start(r *http.Request) (*Response, error) {
	f, err := form.Parse(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	auth, err := e.Auth.Authenticate(ctx, f.Creds, clients.SecretBasic, clients.SecretPost, clients.None, clients.PrivateKeyJWT)
	if err != nil {
		return nil, err
	}
	c := auth.Client
	if c.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP || !slices.Contains(c.GetGrantTypes(), lifecycle.GrantDeviceCode) {
		return nil, oauth.New(oauth.UnauthorizedClient, "the client may not use the device authorization grant").
			WithHint("add OIDC_GRANT_TYPE_DEVICE_CODE to the application's grant types")
	}
	raw := f.Get("scope")
	if strings.ContainsAny(raw, "\t\r\n") {
		return nil, oauth.New(oauth.InvalidScope, "scope values are separated by single spaces")
	}
	var scopes []string
	if raw != "" {
		if scopes, err = scope.Parse(raw); err != nil {
			return nil, err
		}
	}
	if err := scope.Check(scope.ForClient(c), scopes); err != nil {
		return nil, err
	}
	start, err := e.Start.StartDevice(ctx, c, scopes)
	if err != nil {
		return nil, err
	}
	verify := strings.TrimRight(e.Issuer, "/") + VerificationPath
	return &Response{
		DeviceCode: start.DeviceCode, UserCode: start.UserCode, VerificationURI: verify,
		VerificationURIComplete: verify + "?" + url.Values{"user_code": {start.UserCode}}.Encode(),
		ExpiresIn:               start.ExpiresIn, Interval: start.Interval,
	}, nil
}
