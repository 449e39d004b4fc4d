package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// oauth2Proxy is oauth2-proxy (tools/oauth2-proxy) in front of a static
// upstream, signing in through Gatehouse with its defaults: among them,
// an unverified e-mail address is refused.
type oauth2Proxy struct {
	base string
}

// startOAuth2Proxy runs oauth2-proxy for the OIDC client (clientID,
// secret) of issuer, with the redirect URI base+"/oauth2/callback".
func startOAuth2Proxy(t *testing.T, issuer, clientID, secret, addr string) *oauth2Proxy {
	t.Helper()
	bin := oauth2ProxyBin.build(t, "oauth2-proxy", "oauth2-proxy", "github.com/oauth2-proxy/oauth2-proxy/v7")
	base := "http://" + addr
	cmd := exec.Command(bin, "--provider=oidc", "--oidc-issuer-url="+issuer, "--client-id="+clientID, "--client-secret="+secret,
		"--redirect-url="+base+"/oauth2/callback", "--http-address="+addr, "--upstream=static://200", "--email-domain=*",
		"--cookie-secret=0123456789abcdef0123456789abcdef", "--cookie-secure=false", "--scope=openid email profile",
		"--skip-provider-button=true")
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("oauth2-proxy's log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/ping")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return &oauth2Proxy{base: base}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("oauth2-proxy did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signIn goes through the proxy to Gatehouse's login pages and back, and
// returns the proxy's final answer for "/".
func (o *oauth2Proxy) signIn(t *testing.T, e *afEnv, user, password string) (int, string) {
	t.Helper()
	c := browser(t, e.base) // follows redirects within Gatehouse only
	first := &http.Client{Jar: c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := first.Get(o.base + "/oauth2/start?rd=%2F")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	authz := res.Header.Get("Location")
	if !strings.HasPrefix(authz, e.base+"/oauth/v2/authorize?") {
		t.Fatalf("the proxy sent the browser to %q; want Gatehouse's authorize", authz)
	}
	p := e.password(c, afGet(t, c, authz), user, password)
	if p.loc == nil || !strings.HasPrefix(p.loc.String(), o.base+"/oauth2/callback?") {
		t.Fatalf("after the login: %d %v:\n%s", p.status, p.loc, p.body)
	}
	// Back at the proxy: it redeems the code, checks the ID token and
	// sends the browser on to the upstream.
	all := &http.Client{Jar: c.Jar}
	res, err = all.Get(p.loc.String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// oauth2-proxy keeps its default (unverified addresses refused): a user
// whose address is unverified is turned away; once the user proves it
// with the mailed code, the same sign-in reaches the upstream.
func TestOAuth2ProxyRequiresVerifiedEmail(t *testing.T) {
	mp := startMailpit(t)
	e := afStartEnv(t, mp.env())
	addr := freeAddr(t)
	app := e.app(map[string]any{"name": "oauth2-proxy", "redirectUris": []string{"http://" + addr + "/oauth2/callback"},
		"responseTypes": []string{"OIDC_RESPONSE_TYPE_CODE"}, "grantTypes": []string{"OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"},
		"appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "devMode": true})
	proxy := startOAuth2Proxy(t, e.base, app["clientId"].(string), app["clientSecret"].(string), addr)

	u := e.must("POST", "/management/v1/users/human/_import", e.admin, "", map[string]any{"userName": "olga",
		"profile": map[string]any{"firstName": "Olga", "lastName": "Proxy"}, "email": map[string]any{"email": "olga@example.com"},
		"password": afPassword})
	id := u["userId"].(string)
	if status, body := proxy.signIn(t, e, "olga", afPassword); status == http.StatusOK {
		t.Fatalf("oauth2-proxy let an unverified address in: %d %s", status, body)
	}
	// The import mailed a code; the user verifies with it.
	text := mp.text(mp.waitFor("olga@example.com", 1)[0].ID)
	m := regexp.MustCompile(`(?m)^\s*([A-Z2-7]{26})\s*$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no code in:\n%s", text)
	}
	e.must("POST", "/v2/users/"+id+"/email/verify", e.admin, "", map[string]any{"verificationCode": m[1]})
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The tokens service follows the change within about a second.
		status, body := proxy.signIn(t, e, "olga", afPassword)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("oauth2-proxy after the verification: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
