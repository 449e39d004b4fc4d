package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// freeAddr reserves a loopback port for a server whose issuer URL must be
// known before it starts (testutil.FreeAddr).
func freeAddr(t *testing.T) string { t.Helper(); return testutil.FreeAddr(t) }

type keyFile struct {
	Type   string `json:"type"`
	KeyID  string `json:"keyId"`
	Key    string `json:"key"`
	UserID string `json:"userId"`
}

// jwtProfileAssertion signs the RFC 7523 assertion an operator makes from
// bootstrap-admin-key.json.
func jwtProfileAssertion(t *testing.T, kf keyFile, audience string) string {
	t.Helper()
	key, err := jwk.ParseKey([]byte(kf.Key), jwk.WithPEM(true))
	if err != nil {
		t.Fatalf("parse key file: %v", err)
	}
	now := time.Now()
	tok, err := jwt.NewBuilder().Issuer(kf.UserID).Subject(kf.UserID).Audience([]string{audience}).
		IssuedAt(now).Expiration(now.Add(time.Hour)).JwtID(fmt.Sprint(now.UnixNano())).Build()
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, kf.KeyID)
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}

func postForm(t *testing.T, u string, form url.Values) (int, map[string]any) {
	t.Helper()
	res, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func restJSON(t *testing.T, method, u, token string, body any) (int, map[string]any) {
	t.Helper()
	return restJSONOrg(t, method, u, token, "", body)
}

// restJSONOrg is restJSON with x-service-orgid (when org is not empty).
func restJSONOrg(t *testing.T, method, u, token, org string, body any) (int, map[string]any) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, u, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if org != "" {
		req.Header.Set("x-service-orgid", org)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// TestBootstrapToManagement is the operator's path on a fresh embedded
// server: the bootstrap key file gets a management token by the JWT profile
// grant (its ID token verified by go-oidc), the token works on the
// management API, and a machine user created there gets tokens by
// client_credentials through golang.org/x/oauth2.
func TestBootstrapToManagement(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	edge := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_ADMIN_PASSWORD": "Admin-Passw0rd-for-e2e",
	})
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap-admin-key.json"))
	if err != nil {
		t.Fatalf("bootstrap key file: %v", err)
	}
	var kf keyFile
	if err := json.Unmarshal(raw, &kf); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}

	status, tok := postForm(t, edge.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	})
	if status != 200 || tok["token_type"] != "Bearer" {
		t.Fatalf("JWT profile grant: %d %v", status, tok)
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: kf.UserID}).Verify(ctx, tok["id_token"].(string))
	if err != nil || idt.Subject != kf.UserID {
		t.Fatalf("id_token: %v %v", idt, err)
	}
	access := tok["access_token"].(string)

	status, org := restJSON(t, "GET", edge.base+"/management/v1/orgs/me", access, nil)
	if status != 200 || org["org"].(map[string]any)["name"] != "Gatehouse" {
		t.Fatalf("GetMyOrg with the bootstrap token: %d %v", status, org)
	}
	// Without the management audience the token is refused.
	_, plain := postForm(t, edge.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid"},
	})
	if status, _ := restJSON(t, "GET", edge.base+"/management/v1/orgs/me", plain["access_token"].(string), nil); status != 401 {
		t.Fatalf("token without the management audience: %d; want 401", status)
	}

	// A machine user with a secret, then client_credentials.
	status, mu := restJSON(t, "POST", edge.base+"/management/v1/users/machine", access, map[string]any{
		"userName": "reporter", "name": "Reporting job", "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})
	if status != 200 {
		t.Fatalf("AddMachineUser: %d %v", status, mu)
	}
	userID := mu["userId"].(string)
	status, sec := restJSON(t, "PUT", edge.base+"/management/v1/users/"+userID+"/secret", access, map[string]any{})
	if status != 200 {
		t.Fatalf("GenerateMachineSecret: %d %v", status, sec)
	}
	cc := clientcredentials.Config{
		ClientID: sec["clientId"].(string), ClientSecret: sec["clientSecret"].(string),
		TokenURL: provider.Endpoint().TokenURL, Scopes: []string{"urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	}
	ccTok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("client_credentials: %v", err)
	}
	// The machine user has no role yet: authenticated, but forbidden.
	if status, _ := restJSON(t, "GET", edge.base+"/management/v1/users/"+userID, ccTok.AccessToken, nil); status != 403 {
		t.Fatalf("role-less machine token: %d; want 403", status)
	}
	if status, body := restJSON(t, "POST", edge.base+"/management/v1/orgs/me/members", access, map[string]any{
		"userId": userID, "roles": []string{"ORG_USER_MANAGER"}}); status != 200 {
		t.Fatalf("AddOrgMember: %d %v", status, body)
	}
	if status, body := restJSON(t, "GET", edge.base+"/management/v1/users/"+userID, ccTok.AccessToken, nil); status != 200 {
		t.Fatalf("machine token with ORG_USER_MANAGER: %d %v", status, body)
	}
	// A wrong secret is invalid_client.
	bad := cc
	bad.ClientSecret = "wrong"
	if _, err := bad.Token(ctx); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("wrong secret: %v; want invalid_client", err)
	}
}

// In a cluster no file leaves the directory's pod: with
// GATEHOUSE_BOOTSTRAP_PUBLIC_KEY the operator's public key is registered
// for bootstrap-admin, no private key is written, and the ids the
// operator's key file needs are in the log.
func TestBootstrapWithPublicKey(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	p := startProc(t, config.RoleEdge, map[string]string{
		"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer,
		"GATEHOUSE_BOOTSTRAP_PUBLIC_KEY": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
	})
	if _, err := os.Stat(filepath.Join(dir, "bootstrap-admin-key.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a private key file was written: %v", err)
	}
	var kf keyFile
	for _, l := range p.log.Lines() {
		if strings.Contains(fmt.Sprint(l["msg"]), "GATEHOUSE_BOOTSTRAP_PUBLIC_KEY") {
			kf.UserID, _ = l["user_id"].(string)
			kf.KeyID, _ = l["key_id"].(string)
		}
	}
	if kf.UserID == "" || kf.KeyID == "" {
		t.Fatalf("no user and key id in the log:\n%s", p.log)
	}
	kf.Key = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(priv)}))
	status, tok := postForm(t, p.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	})
	access, _ := tok["access_token"].(string)
	if status != 200 || access == "" {
		t.Fatalf("JWT profile with the operator's key: %d %v", status, tok)
	}
	if status, org := restJSON(t, "GET", p.base+"/management/v1/orgs/me", access, nil); status != 200 {
		t.Fatalf("management API with the operator's token: %d %v", status, org)
	}
}
