package grants_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/device"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection/tokentest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
)

var userCodeForm = regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)

// deviceAuth is a device authorization response.
type deviceAuth struct {
	DeviceCode, UserCode, VerificationURI, VerificationURIComplete string
	ExpiresIn, Interval                                            float64
}

// startDevice asks the device authorization endpoint as c for scope.
func (f *fixture) startDevice(t testing.TB, c *tokentest.Client, scope string) *tokentest.Response {
	t.Helper()
	form, edit := f.auth(t, c)
	if scope != "" {
		form.Set("scope", scope)
	}
	return tokentest.Call(t, http.MethodPost, f.base+device.Path, form, edit)
}

func (f *fixture) device(t testing.TB, c *tokentest.Client, scope string) deviceAuth {
	t.Helper()
	res := f.startDevice(t, c, scope)
	if res.Status != 200 || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("device authorization: %d %s", res.Status, res.Body)
	}
	m := res.JSON(t)
	str := func(k string) string { s, _ := m[k].(string); return s }
	num := func(k string) float64 { n, _ := m[k].(float64); return n }
	return deviceAuth{str("device_code"), str("user_code"), str("verification_uri"), str("verification_uri_complete"),
		num("expires_in"), num("interval")}
}

func (f *fixture) poll(t testing.TB, c *tokentest.Client, code string) *tokentest.Response {
	t.Helper()
	return f.token(t, c, url.Values{"grant_type": {lifecycle.GrantDeviceCode}, "device_code": {code}})
}

// decide approves (session not empty) or denies the authorization a user
// code names, through the internal API as authn does.
func (f *fixture) decide(t testing.TB, userCode, session string) error {
	t.Helper()
	ctx := context.Background()
	d, err := f.rpc.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: userCode})
	if err != nil {
		return err
	}
	req := &tokensv1.DecideDeviceAuthorizationRequest{DeviceId: d.GetDeviceId()}
	if session != "" {
		req.Approve, req.UserId, req.OrgId, req.SessionId = true, aliceID, "org-1", session
		req.AuthTime, req.Amr = timestamppb.New(f.Clock.Now().Add(-time.Minute)), []string{"pwd", "otp"}
	}
	_, err = f.rpc.DecideDeviceAuthorization(ctx, req)
	return err
}

// TestDeviceAuthorizationEndpoint: RFC 8628 §3.1 and §3.2 — the response,
// who may ask, and what for.
func TestDeviceAuthorizationEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "sqlite", options{})
	d := f.device(t, f.tv, "openid offline_access")
	if !strings.HasPrefix(d.DeviceCode, "gatehouse_dc_") || !userCodeForm.MatchString(d.UserCode) ||
		d.VerificationURI != tokentest.Issuer+"/device" ||
		d.VerificationURIComplete != tokentest.Issuer+"/device?user_code="+d.UserCode || d.ExpiresIn != 600 || d.Interval != 5 {
		t.Fatalf("response %+v", d)
	}
	if other := f.device(t, f.tv, ""); other.UserCode == d.UserCode || other.DeviceCode == d.DeviceCode {
		t.Fatal("two authorizations share a code")
	}
	// A confidential client authenticates with its secret.
	f.device(t, f.tvSecret, "openid")
	form, _ := f.auth(t, f.tvSecret)
	res := tokentest.Call(t, http.MethodPost, f.base+device.Path, form, tokentest.Basic(f.tvSecret.GetClientId(), "wrong"))
	wantError(t, res, http.StatusUnauthorized, "invalid_client")
	// An app without the grant, a machine user.
	wantError(t, f.startDevice(t, f.basic, "openid"), http.StatusBadRequest, "unauthorized_client")
	wantError(t, f.startDevice(t, f.robot, "openid"), http.StatusBadRequest, "unauthorized_client")
	// Scopes: the reserved ones' rules, well-formed values.
	wantError(t, f.startDevice(t, f.tv, "openid urn:zitadel:iam:org:project:id:zitadel:aud"), http.StatusBadRequest, "invalid_scope")
	wantError(t, f.startDevice(t, f.tv, "openid\tprofile"), http.StatusBadRequest, "invalid_scope")
	// A GET is refused.
	res = tokentest.Call(t, http.MethodGet, f.base+device.Path, nil, nil)
	if res.Status == 200 {
		t.Fatalf("GET answered %d", res.Status)
	}
}

// TestDevicePolling: authorization_pending, slow_down growing the interval
// by 5 s for every later poll, the tokens once after approval, and only
// for the client that asked.
func TestDevicePolling(t *testing.T) {
	t.Parallel()
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		d := f.device(t, f.tv, "openid profile offline_access")
		wantError(t, f.poll(t, f.tv, d.DeviceCode), http.StatusBadRequest, "authorization_pending")
		wantError(t, f.poll(t, f.tv, d.DeviceCode), http.StatusBadRequest, "slow_down") // at once
		f.advance(t, 6*time.Second)
		res := f.poll(t, f.tv, d.DeviceCode) // the interval was 10 s; now 15 s
		wantError(t, res, http.StatusBadRequest, "slow_down")
		if desc := res.JSON(t)["error_description"]; desc != "polling too fast: wait 15 seconds between requests" {
			t.Fatalf("slow_down says %q", desc)
		}
		f.advance(t, 14*time.Second) // 15 s less the second of tolerance
		wantError(t, f.poll(t, f.tv, d.DeviceCode), http.StatusBadRequest, "authorization_pending")
		f.advance(t, 13*time.Second)
		wantError(t, f.poll(t, f.tv, d.DeviceCode), http.StatusBadRequest, "slow_down")
		f.advance(t, 20*time.Second)
		wantError(t, f.poll(t, f.tv, d.DeviceCode), http.StatusBadRequest, "authorization_pending")

		if err := f.decide(t, strings.ToLower(strings.ReplaceAll(d.UserCode, "-", " ")), "sess-tv"); err != nil {
			t.Fatal(err)
		}
		// Another client's poll changes nothing.
		wantError(t, f.poll(t, f.tvSecret, d.DeviceCode), http.StatusBadRequest, "invalid_grant")
		tk := wantTokens(t, f.poll(t, f.tv, d.DeviceCode))
		if tk.IDToken == "" || tk.RefreshToken == "" || tk.Scope != "openid profile offline_access" {
			t.Fatalf("tokens %+v", tk)
		}
		id := f.claims(t, tk.IDToken)
		if id["sub"] != aliceID || id["sid"] != "sess-tv" || !slices.Equal(strs(id["amr"]), []string{"pwd", "otp"}) {
			t.Fatalf("id token %v", id)
		}
		at := f.claims(t, tk.AccessToken)
		if at["client_id"] != f.tv.GetClientId() || at["sub"] != aliceID {
			t.Fatalf("access token %v", at)
		}
		// Exactly once; the refresh token works.
		wantError(t, f.poll(t, f.tv, d.DeviceCode), http.StatusBadRequest, "invalid_grant")
		wantTokens(t, f.refresh(t, f.tv, tk.RefreshToken, nil))
		// Unknown codes, and other kinds of token.
		wantError(t, f.poll(t, f.tv, "gatehouse_dc_unknown"), http.StatusBadRequest, "invalid_grant")
		wantError(t, f.poll(t, f.tv, tk.RefreshToken), http.StatusBadRequest, "invalid_grant")
		wantError(t, f.token(t, f.tv, url.Values{"grant_type": {lifecycle.GrantDeviceCode}}), http.StatusBadRequest, "invalid_request")
		// Without openid: an access token, no ID token.
		d2 := f.device(t, f.tvSecret, "profile")
		if err := f.decide(t, d2.UserCode, "sess-tv"); err != nil {
			t.Fatal(err)
		}
		if tk := wantTokens(t, f.poll(t, f.tvSecret, d2.DeviceCode)); tk.IDToken != "" || tk.RefreshToken != "" {
			t.Fatalf("tokens without openid: %+v", tk)
		}
	})
}

// TestDeviceEndings: denied, expired, and approvals voided before their
// redemption by a logout or a user's cut-off; a code is decided once.
func TestDeviceEndings(t *testing.T) {
	t.Parallel()
	forDialects(t, options{}, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		denied := f.device(t, f.tv, "openid")
		if err := f.decide(t, denied.UserCode, ""); err != nil {
			t.Fatal(err)
		}
		wantError(t, f.poll(t, f.tv, denied.DeviceCode), http.StatusBadRequest, "access_denied")
		if err := f.decide(t, denied.UserCode, "sess-1"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("a second decision: %v", err)
		}

		loggedOut := f.device(t, f.tv, "openid")
		if err := f.decide(t, loggedOut.UserCode, "sess-out"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.rpc.RevokeSession(ctx, &tokensv1.RevokeSessionRequest{SessionId: "sess-out"}); err != nil {
			t.Fatal(err)
		}
		wantError(t, f.poll(t, f.tv, loggedOut.DeviceCode), http.StatusBadRequest, "expired_token")

		cut := f.device(t, f.tv, "openid")
		if err := f.decide(t, cut.UserCode, "sess-cut"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.rpc.RevokeUserTokens(ctx, &tokensv1.RevokeUserTokensRequest{UserId: aliceID,
			NotAfter: timestamppb.New(f.Clock.Now())}); err != nil {
			t.Fatal(err)
		}
		wantError(t, f.poll(t, f.tv, cut.DeviceCode), http.StatusBadRequest, "expired_token")

		late := f.device(t, f.tv, "openid")
		f.advance(t, 10*time.Minute)
		wantError(t, f.poll(t, f.tv, late.DeviceCode), http.StatusBadRequest, "expired_token")
		if err := f.decide(t, late.UserCode, "sess-1"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("an expired code at /device: %v", err)
		}
	})
}

// TestDeviceRPCRules: the internal API's refusals.
func TestDeviceRPCRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "sqlite", options{})
	ctx := context.Background()
	for _, typed := range []string{"", "BCDF-GHJ", "BCDF-GHJKL", "AEIO-UBCD", "BCDF-GHJ1", strings.Repeat("B", 40)} {
		_, err := f.rpc.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: typed})
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("user code %q: %v", typed, err)
		}
	}
	if _, err := f.rpc.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: "BCDF-GHJK"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("unknown user code: %v", err)
	}
	d := f.device(t, f.tv, "openid")
	got, err := f.rpc.GetDeviceAuthorization(ctx, &tokensv1.GetDeviceAuthorizationRequest{UserCode: d.UserCode})
	if err != nil || got.GetClientId() != f.tv.GetClientId() || got.GetUserCode() != d.UserCode ||
		!slices.Equal(got.GetScopes(), []string{"openid"}) {
		t.Fatalf("GetDeviceAuthorization: %v %v", got, err)
	}
	approve := &tokensv1.DecideDeviceAuthorizationRequest{DeviceId: got.GetDeviceId(), Approve: true, UserId: aliceID,
		OrgId: "org-1", SessionId: "s", AuthTime: timestamppb.New(f.Clock.Now())}
	bad := []*tokensv1.DecideDeviceAuthorizationRequest{
		{DeviceId: ""},
		{DeviceId: got.GetDeviceId(), Approve: true, OrgId: "org-1", AuthTime: approve.AuthTime},                  // no user
		{DeviceId: got.GetDeviceId(), Approve: true, UserId: aliceID, OrgId: "org-1"},                             // no auth_time
		{DeviceId: got.GetDeviceId(), Approve: true, UserId: aliceID, AuthTime: approve.AuthTime},                 // no org
		{DeviceId: got.GetDeviceId(), Approve: true, UserId: aliceID, OrgId: "org-2", AuthTime: approve.AuthTime}, // another org
	}
	for i, r := range bad {
		if _, err := f.rpc.DecideDeviceAuthorization(ctx, r); err == nil {
			t.Errorf("bad decision %d accepted", i)
		}
	}
	// The client lost the grant since: the approval is refused.
	f.tv.GrantTypes = []string{"refresh_token"}
	if _, err := f.rpc.DecideDeviceAuthorization(ctx, approve); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("approval for a client without the grant: %v", err)
	}
}
