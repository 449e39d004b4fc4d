package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// DeviceLogin is one device authorization grant sign-in (RFC 8628): the
// CLI shows a code and a URL, the person approves on any device with a
// browser, and the CLI polls for the tokens. For a machine without a
// browser (an SSH session, a container).
type DeviceLogin struct {
	Client   *Client
	ClientID string
	// Show tells the person where to go and which code to enter.
	Show func(verificationURI, userCode, verificationURIComplete string)
	// Timeout bounds the wait, within the code's own lifetime.
	Timeout time.Duration
}

// Run asks for a device code, shows it, and polls until the person
// approves (the tokens), denies, or the code expires.
func (d *DeviceLogin) Run(ctx context.Context) (*Token, error) {
	conf := &oauth2.Config{
		ClientID: d.ClientID,
		Endpoint: oauth2.Endpoint{
			DeviceAuthURL: d.Client.endpoint("/oauth/v2/device_authorization"),
			TokenURL:      d.Client.endpoint("/oauth/v2/token"),
			AuthStyle:     oauth2.AuthStyleInParams, // a public client sends its client_id
		},
		Scopes: strings.Fields(sessionScopes + " email offline_access"),
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, d.Client.http())
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("device login: %w", oauthError(err))
	}
	d.Show(da.VerificationURI, da.UserCode, da.VerificationURIComplete)
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	t, err := conf.DeviceAccessToken(ctx, da)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("device login: not approved within %s", d.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("device login: %w", oauthError(err))
	}
	return &Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Expiry: t.Expiry}, nil
}

// oauthError turns x/oauth2's error into the CLI's own.
func oauthError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return &OAuthError{Status: status, Code: re.ErrorCode, Description: re.ErrorDescription}
	}
	return err
}
