package management_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

func appPublicPEM(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func appRSAKey(t *testing.T, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func appStoredKey(t *testing.T, e *mgmttest.Env, keyID string) (pemText string, exp *time.Time) {
	t.Helper()
	var row struct {
		PublicKey  string     `db:"public_key"`
		Expiration *time.Time `db:"expiration_date"`
	}
	if err := e.DB.Get(context.Background(), &row, `SELECT public_key, expiration_date FROM app_keys WHERE id = ?`, keyID); err != nil {
		t.Fatalf("stored key %s: %v", keyID, err)
	}
	return row.PublicKey, row.Expiration
}

func TestAppKeys(t *testing.T) {
	// Keys made once: RSA generation is the slow part of this test.
	rsa2048, rsa1024 := appRSAKey(t, 2048), appRSAKey(t, 1024)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		q := &projects.Queries{DB: e.DB}
		projectID := appNewProject(t, e, e.AdminToken, "", "Keyed")
		base := "/management/v1/projects/" + projectID + "/apps"
		r := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("pkjwt", appSet("authMethodType", "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT")))
		appID, clientID := appStr(r.JSON["appId"]), appStr(r.JSON["clientId"])
		keys := base + "/" + appID + "/keys"

		// Generated key over REST: the key file holds the private key, the
		// store only its public half.
		k := appOK(t, e, "AddAppKey", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON"})
		evs := e.Events(projectID)
		appRESTDetails(t, "AddAppKey", k, "", evs[len(evs)-1], e.OrgID)
		keyID := appStr(k.JSON["id"])
		raw, err := base64.StdEncoding.DecodeString(appStr(k.JSON["keyDetails"]))
		if err != nil {
			t.Fatalf("keyDetails: %v", err)
		}
		var file struct{ Type, KeyID, Key, ClientID, AppID string }
		if err := json.Unmarshal(raw, &file); err != nil {
			t.Fatalf("key file %s: %v", raw, err)
		}
		if file.Type != "application" || file.KeyID != keyID || file.ClientID != clientID || file.AppID != appID ||
			!strings.HasPrefix(file.Key, "-----BEGIN RSA PRIVATE KEY-----") {
			t.Fatalf("key file = %s", raw)
		}
		block, _ := pem.Decode([]byte(file.Key))
		priv, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil || priv.N.BitLen() != 2048 {
			t.Fatalf("private key: %v", err)
		}
		stored, exp := appStoredKey(t, e, keyID)
		if stored != string(appPublicPEM(t, &priv.PublicKey)) || exp != nil {
			t.Fatalf("stored key %q exp %v; want the generated key's public PEM, no expiry", stored, exp)
		}
		if strings.Contains(string(evs[len(evs)-1].Payload), "PRIVATE") {
			t.Fatal("the event holds private key material")
		}

		// Provided public key over gRPC, with an expiration.
		c := e.Client("grpc", e.AdminToken, "")
		expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Microsecond)
		res, err := c.AddAppKey(ctx, &managementv1.AddAppKeyRequest{
			ProjectId: projectID, AppId: appID, Type: managementv1.KeyType_KEY_TYPE_JSON,
			ExpirationDate: timestamppb.New(expires), PublicKey: appPublicPEM(t, &rsa2048.PublicKey),
		})
		if err != nil {
			t.Fatalf("AddAppKey over gRPC: %v", err)
		}
		evs = e.Events(projectID)
		appWriteDetails(t, "AddAppKey over gRPC", res.GetDetails(), evs[len(evs)-1], e.OrgID)
		if len(res.GetKeyDetails()) != 0 {
			t.Fatal("a provided public key returned key details")
		}
		stored, exp = appStoredKey(t, e, res.GetId())
		if stored != string(appPublicPEM(t, &rsa2048.PublicKey)) || exp == nil || !exp.Equal(expires) {
			t.Fatalf("stored %q exp %v; want expiry %v", stored, exp, expires)
		}
		// A PKCS #1 public key is accepted and stored as PKIX.
		pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsa2048.PublicKey)})
		p1 := appOK(t, e, "PKCS #1 key", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": pkcs1})
		if s, _ := appStoredKey(t, e, appStr(p1.JSON["id"])); s != string(appPublicPEM(t, &rsa2048.PublicKey)) {
			t.Fatalf("PKCS #1 key stored as %q", s)
		}

		// The read details of the app move with its keys.
		g, err := c.GetAppByID(ctx, &managementv1.GetAppByIDRequest{ProjectId: projectID, AppId: appID})
		if err != nil {
			t.Fatal(err)
		}
		evs = e.Events(projectID)
		var added int
		for _, ev := range evs {
			if ev.Type == "project.application.added" {
				added++
			}
		}
		if added != 1 {
			t.Fatalf("project has %d app events; want 1", added)
		}
		appReadDetails(t, "app after key changes", g.GetApp().GetDetails(), evs[1], evs[len(evs)-1], e.OrgID)

		// Limits.
		padded := appPublicPEM(t, &rsa2048.PublicKey)
		padded = append(padded, strings.Repeat("\n", 10000-len(padded))...)
		appOK(t, e, "10000-byte public key", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": padded})
		appRefused(t, e, "10001-byte public key", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": append(padded, '\n')}, 400, 3)
		appRefused(t, e, "RSA 1024", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": appPublicPEM(t, &rsa1024.PublicKey)}, 400, 3)
		appRefused(t, e, "EC key", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": appPublicPEM(t, &ec.PublicKey)}, 400, 3)
		appRefused(t, e, "not PEM", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte("garbage")}, 400, 3)
		appRefused(t, e, "two PEM blocks", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON",
			"publicKey": append(appPublicPEM(t, &rsa2048.PublicKey), appPublicPEM(t, &rsa2048.PublicKey)...)}, 400, 3)
		appRefused(t, e, "unspecified type", "POST", keys, map[string]any{}, 400, 3)
		appRefused(t, e, "past expiration", "POST", keys, map[string]any{"type": "KEY_TYPE_JSON", "expirationDate": "2020-01-01T00:00:00Z"}, 400, 3)
		appRefused(t, e, "unknown app", "POST", base+"/404/keys", map[string]any{"type": "KEY_TYPE_JSON"}, 404, 5)
		appRefused(t, e, "201-char app id", "POST", base+"/"+strings.Repeat("1", 201)+"/keys", map[string]any{"type": "KEY_TYPE_JSON"}, 400, 3)
		basic := appOK(t, e, "AddOIDCApp", "POST", base+"/oidc", appOIDCBody("basic for keys"))
		appRefused(t, e, "BASIC app", "POST", base+"/"+appStr(basic.JSON["appId"])+"/keys", map[string]any{"type": "KEY_TYPE_JSON"}, 409, 10)
		apiBasic := appOK(t, e, "AddAPIApp", "POST", base+"/api", map[string]any{"name": "api basic keys"})
		appRefused(t, e, "BASIC API app", "POST", base+"/"+appStr(apiBasic.JSON["appId"])+"/keys", map[string]any{"type": "KEY_TYPE_JSON"}, 409, 10)
		apiPK := appOK(t, e, "AddAPIApp", "POST", base+"/api", map[string]any{"name": "api pk keys", "authMethodType": "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT"})
		apiKeys := base + "/" + appStr(apiPK.JSON["appId"]) + "/keys"
		apiKey := appOK(t, e, "API app key", "POST", apiKeys, map[string]any{"type": "KEY_TYPE_JSON", "publicKey": appPublicPEM(t, &rsa2048.PublicKey)})

		// AppByClientID: what the token endpoint will read.
		cl, err := q.AppByClientID(ctx, clientID)
		if err != nil {
			t.Fatalf("AppByClientID: %v", err)
		}
		if cl.ID != appID || cl.ProjectID != projectID || cl.OrgID != e.OrgID || !cl.Active() || cl.OIDC == nil ||
			cl.AuthMethod() != projects.AuthPrivateKeyJWT || len(cl.SecretHash) != 0 || len(cl.Keys) != 4 ||
			cl.Keys[0].ID != keyID || cl.Keys[1].Expiration == nil || !cl.Keys[1].Expiration.Equal(expires) || cl.Keys[0].Expiration != nil {
			t.Fatalf("AppByClientID = %+v", cl)
		}
		bc, err := q.AppByClientID(ctx, appStr(basic.JSON["clientId"]))
		if err != nil || !appHasher(t).Verify(appStr(basic.JSON["clientSecret"]), bc.SecretHash) || len(bc.Keys) != 0 ||
			bc.OIDC.RedirectURIs[0] != "https://app.example.com/cb" {
			t.Fatalf("AppByClientID(basic) = %+v, %v", bc, err)
		}
		if _, err := q.AppByClientID(ctx, "nope"); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("AppByClientID(unknown) = %v; want ErrNotFound", err)
		}

		// RemoveAppKey.
		rm := appOK(t, e, "RemoveAppKey", "DELETE", keys+"/"+keyID, nil)
		evs = e.Events(projectID)
		appRESTDetails(t, "RemoveAppKey", rm, "", evs[len(evs)-1], e.OrgID)
		if cl, _ := q.AppByClientID(ctx, clientID); len(cl.Keys) != 3 {
			t.Fatalf("keys after removal: %d; want 3", len(cl.Keys))
		}
		appRefused(t, e, "removed key", "DELETE", keys+"/"+keyID, nil, 404, 5)
		appRefused(t, e, "unknown key", "DELETE", keys+"/404", nil, 404, 5)
		appRefused(t, e, "key of another app", "DELETE", keys+"/"+appStr(apiKey.JSON["id"]), nil, 404, 5)
		appRefused(t, e, "201-char key id", "DELETE", keys+"/"+strings.Repeat("1", 201), nil, 400, 3)
		_, err = e.Client("grpc-web", e.AdminToken, "").RemoveAppKey(ctx, &managementv1.RemoveAppKeyRequest{
			ProjectId: projectID, AppId: appStr(apiPK.JSON["appId"]), KeyId: appStr(apiKey.JSON["id"]),
		})
		if err != nil {
			t.Fatalf("RemoveAppKey over gRPC-web: %v", err)
		}

		_, otherOwner := e.SeedOrg("Keys Other", "kowner")
		token := e.Intro.Mint(otherOwner)
		theirProject := appNewProject(t, e, token, "", "Their keys")
		tr := e.REST("POST", "/management/v1/projects/"+theirProject+"/apps/api", token, "", map[string]any{"name": "x", "authMethodType": "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT"})
		theirKeys := "/management/v1/projects/" + theirProject + "/apps/" + appStr(tr.JSON["appId"]) + "/keys"
		tk := e.REST("POST", theirKeys, token, "", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": appPublicPEM(t, &rsa2048.PublicKey)})
		if tk.Status != 200 {
			t.Fatalf("other owner AddAppKey: %d %s", tk.Status, tk.Body)
		}
		appRefused(t, e, "add key to other org's app", "POST", theirKeys, map[string]any{"type": "KEY_TYPE_JSON"}, 404, 5)
		appRefused(t, e, "remove other org's key", "DELETE", theirKeys+"/"+appStr(tk.JSON["id"]), nil, 404, 5)

		e.Restart()
		if cl, err := q.AppByClientID(ctx, clientID); err != nil || len(cl.Keys) != 3 {
			t.Fatalf("after restart: %+v %v", cl, err)
		}
		appRefused(t, e, "removed key after restart", "DELETE", keys+"/"+keyID, nil, 404, 5)
	})
}
