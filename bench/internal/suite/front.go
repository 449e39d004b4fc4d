package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
)

// devicePollCodes is how many pending device authorizations the
// device-poll scenario polls in turn: each poll of one code is sooner than
// its interval, so the answers are authorization_pending (a code's first
// poll) and slow_down, as a crowd of impatient devices gets.
const devicePollCodes = 64

// addDeviceApp adds a public native app for the device authorization
// grant; a server without the grant refuses it (the scenario is then not
// available).
func addDeviceApp(ctx context.Context, m mgmt, projectID string) (string, error) {
	var app struct {
		ClientID string `json:"clientId"`
	}
	if err := m.do(ctx, http.MethodPost, "/projects/"+url.PathEscape(projectID)+"/apps/oidc", map[string]any{
		"name": "bench-device", "redirectUris": []string{}, "grantTypes": []string{"OIDC_GRANT_TYPE_DEVICE_CODE"},
		"appType": "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "accessTokenType": "OIDC_TOKEN_TYPE_BEARER",
	}, &app); err != nil {
		return "", err
	}
	return app.ClientID, nil
}

// devicePollOp polls the token endpoint for pending device codes.
func devicePollOp(ctx context.Context, c *http.Client, t Target, f *Fixture) (load.Op, error) {
	if f.DeviceClientID == "" {
		return nil, &notAvailable{"the server refused a device app (OIDC_GRANT_TYPE_DEVICE_CODE)"}
	}
	codes := make([]string, devicePollCodes)
	for i := range codes {
		var da struct {
			DeviceCode string `json:"device_code"`
		}
		err := call(ctx, c, http.MethodPost, t.Base+"/oauth/v2/device_authorization", "", "",
			url.Values{"client_id": {f.DeviceClientID}, "scope": {"openid"}}, &da)
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusNotFound {
			return nil, &notAvailable{"POST /oauth/v2/device_authorization answered 404"}
		}
		if err != nil || da.DeviceCode == "" {
			return nil, fmt.Errorf("device authorization: %v", err)
		}
		codes[i] = da.DeviceCode
	}
	var next atomic.Uint64
	u := t.Base + "/oauth/v2/token"
	return func(ctx context.Context) (int, error) {
		code := codes[next.Add(1)%devicePollCodes]
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {code},
			"client_id": {f.DeviceClientID}}.Encode()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return res.StatusCode, err
		}
		var e struct {
			Error string `json:"error"`
		}
		if res.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil ||
			(e.Error != "authorization_pending" && e.Error != "slow_down") {
			return res.StatusCode, fmt.Errorf("device poll: HTTP %d: %.200s", res.StatusCode, body)
		}
		return res.StatusCode, nil
	}, nil
}

// parOp pushes the web app's authorization request (client_secret_basic)
// and checks the request_uri.
func parOp(ctx context.Context, c *http.Client, t Target, f *Fixture) (load.Op, error) {
	params := url.Values{"response_type": {"code"}, "redirect_uri": {RedirectURI}, "scope": {"openid profile"},
		"state": {"bench-state"}, "nonce": {"bench-nonce"}, "code_challenge": {s256("bench-verifier-" + strings.Repeat("v", 40))},
		"code_challenge_method": {"S256"}}
	err := call(ctx, c, http.MethodPost, t.Base+"/oauth/v2/par", f.Web.basic(), "", params, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil, &notAvailable{"POST /oauth/v2/par answered 404"}
	}
	if err != nil {
		return nil, fmt.Errorf("pushed authorization request: %w", err)
	}
	form := params.Encode()
	return load.RequestOp(c, formRequest(t.Base+"/oauth/v2/par", f.Web.basic(), form), func(body []byte) error {
		var r struct {
			RequestURI string `json:"request_uri"`
			ExpiresIn  int    `json:"expires_in"`
		}
		if err := json.Unmarshal(body, &r); err != nil || !strings.HasPrefix(r.RequestURI, "urn:ietf:params:oauth:request_uri:") || r.ExpiresIn <= 0 {
			return fmt.Errorf("not a pushed authorization response: %.100s", body)
		}
		return nil
	}), nil
}
