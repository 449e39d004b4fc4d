package management_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mgmttest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Test keys, generated once for both dialects.
var (
	usrKeysOnce            sync.Once
	usrRSA2048, usrRSA2047 *rsa.PrivateKey
)

func usrKeys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	usrKeysOnce.Do(func() {
		usrRSA2048, _ = rsa.GenerateKey(rand.Reader, 2048)
		usrRSA2047, _ = rsa.GenerateKey(rand.Reader, 2047)
	})
	if usrRSA2048 == nil || usrRSA2047 == nil {
		t.Fatal("generating test keys failed")
	}
	return usrRSA2048, usrRSA2047
}

func usrPKIX(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestMachineUser(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		e := mgmttest.Start(t, d)
		ctx := context.Background()
		otherOrg, _ := e.SeedOrg("Other Org", "owner2")
		human := e.SeedUser(e.OrgID, "human")
		tok := e.AdminToken
		plainTok := e.Intro.Mint(e.SeedUser(e.OrgID, "plain"))
		const addPath = "/management/v1/users/machine"
		addMachine := func(t *testing.T, org string, b map[string]any) string {
			t.Helper()
			r := e.REST("POST", addPath, tok, org, b)
			id, _ := r.JSON["userId"].(string)
			if r.Status != 200 || id == "" {
				t.Fatalf("AddMachineUser %v: %d %s", b, r.Status, r.Body)
			}
			usrWantWriteJSON(t, "AddMachineUser", r, usrLast(t, e, id))
			return id
		}
		svc := addMachine(t, "", map[string]any{"userName": "svc", "name": "Service", "description": "builds", "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})
		foreign := addMachine(t, otherOrg, map[string]any{"userName": "svc", "name": "Foreign"})

		t.Run("add", func(t *testing.T) {
			got := e.REST("GET", "/management/v1/users/"+svc, tok, "", nil)
			u, _ := got.JSON["user"].(map[string]any)
			m, _ := u["machine"].(map[string]any)
			if u["preferredLoginName"] != "svc@acme-corp.localhost" || u["state"] != "USER_STATE_ACTIVE" || m["name"] != "Service" ||
				m["description"] != "builds" || m["accessTokenType"] != "ACCESS_TOKEN_TYPE_JWT" || m["hasSecret"] == true {
				t.Fatalf("machine user read back as %s", got.Body)
			}
			addMachine(t, "", map[string]any{"userName": strings.Repeat("m", 200), "name": strings.Repeat("n", 200), "description": strings.Repeat("d", 500)})
			cases := []struct {
				name   string
				body   map[string]any
				status int
				code   int
			}{
				{"name of 201 characters", map[string]any{"userName": "m1", "name": strings.Repeat("n", 201)}, 400, 3},
				{"no name", map[string]any{"userName": "m2"}, 400, 3},
				{"description of 501 characters", map[string]any{"userName": "m3", "name": "N", "description": strings.Repeat("d", 501)}, 400, 3},
				{"user name of 201 characters", map[string]any{"userName": strings.Repeat("m", 201), "name": "N"}, 400, 3},
				{"no user name", map[string]any{"name": "N"}, 400, 3},
				{"user name with a tab", map[string]any{"userName": "m\t4", "name": "N"}, 400, 3},
				{"undefined access token type", map[string]any{"userName": "m5", "name": "N", "accessTokenType": 99}, 400, 3},
				{"taken by a machine", map[string]any{"userName": "svc", "name": "N"}, 409, 6},
				{"taken by a human", map[string]any{"userName": "human", "name": "N"}, 409, 6},
			}
			for _, tc := range cases {
				usrRefused(t, e, tc.name, "POST", addPath, tok, "", tc.body, tc.status, tc.code)
			}
			usrRefused(t, e, "no role", "POST", addPath, plainTok, "", map[string]any{"userName": "m6", "name": "N"}, 403, 7)
			res, err := e.Client("grpc", tok, "").AddMachineUser(ctx, &managementv1.AddMachineUserRequest{UserName: "svc-grpc", Name: "G"})
			if err != nil {
				t.Fatalf("AddMachineUser over gRPC: %v", err)
			}
			usrWantWrite(t, "AddMachineUser over gRPC", res.GetDetails(), usrLast(t, e, res.GetUserId()))
		})

		t.Run("secret", func(t *testing.T) {
			hasher, err := secrets.NewHasher(bytes.Repeat([]byte{42}, 32)) // the test service's master key
			if err != nil {
				t.Fatal(err)
			}
			path := func(id string) string { return "/management/v1/users/" + id + "/secret" }
			q := &users.Queries{DB: e.DB}
			r := e.REST("PUT", path(svc), tok, "", map[string]any{})
			if r.Status != 200 {
				t.Fatalf("GenerateMachineSecret: %d %s", r.Status, r.Body)
			}
			ev := usrLast(t, e, svc)
			usrWantWriteJSON(t, "GenerateMachineSecret", r, ev)
			secret := usrStr(r.JSON["clientSecret"])
			if r.JSON["clientId"] != "svc@acme-corp.localhost" || len(secret) != 43 {
				t.Fatalf("credentials %s; want client id svc@acme-corp.localhost and a 256-bit secret", r.Body)
			}
			if ev.Type != users.EventSecretSet || strings.Contains(string(ev.Payload), secret) {
				t.Fatalf("event %s %s; want %s without the secret", ev.Type, ev.Payload, users.EventSecretSet)
			}
			u, err := q.ByClientID(ctx, "svc@acme-corp.localhost")
			if err != nil || u.ID != svc || !hasher.Verify(secret, u.SecretHash) {
				t.Fatalf("ByClientID: %v %v; want the machine user with the secret's hash", u, err)
			}
			got := e.REST("GET", "/management/v1/users/"+svc, tok, "", nil)
			if m, _ := got.JSON["user"].(map[string]any)["machine"].(map[string]any); m["hasSecret"] != true {
				t.Fatalf("hasSecret not set: %s", got.Body)
			}

			// Another org's machine of the same user name gets another client id.
			r2 := e.REST("PUT", path(foreign), tok, otherOrg, map[string]any{})
			if r2.Status != 200 || r2.JSON["clientId"] != "svc@other-org.localhost" {
				t.Fatalf("secret of the other org's svc: %d %s", r2.Status, r2.Body)
			}

			// Regenerating replaces the secret.
			res, err := e.Client("grpc-web", tok, "").GenerateMachineSecret(ctx, &managementv1.GenerateMachineSecretRequest{UserId: svc})
			if err != nil {
				t.Fatalf("GenerateMachineSecret over gRPC-web: %v", err)
			}
			usrWantWrite(t, "regenerate", res.GetDetails(), usrLast(t, e, svc))
			u, _ = q.ByClientID(ctx, res.GetClientId())
			if res.GetClientSecret() == secret || hasher.Verify(secret, u.SecretHash) || !hasher.Verify(res.GetClientSecret(), u.SecretHash) {
				t.Fatal("regenerating did not replace the secret")
			}

			usrRefused(t, e, "human user", "PUT", path(human), tok, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "other org's machine", "PUT", path(foreign), tok, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "unknown user", "PUT", path("4242"), tok, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "no role", "PUT", path(svc), plainTok, "", map[string]any{}, 403, 7)

			r = e.REST("DELETE", path(svc), tok, "", nil)
			if r.Status != 200 {
				t.Fatalf("RemoveMachineSecret: %d %s", r.Status, r.Body)
			}
			usrWantWriteJSON(t, "RemoveMachineSecret", r, usrLast(t, e, svc))
			if _, err := q.ByClientID(ctx, "svc@acme-corp.localhost"); err == nil {
				t.Fatal("client id still resolves after the secret was removed")
			}
			usrRefused(t, e, "remove a missing secret", "DELETE", path(svc), tok, "", nil, 409, 10)
			usrRefused(t, e, "remove a human's secret", "DELETE", path(human), tok, "", nil, 404, 5)
			usrRefused(t, e, "remove other org's secret", "DELETE", path(foreign), tok, "", nil, 404, 5)
			usrRefused(t, e, "remove without role", "DELETE", path(foreign), plainTok, otherOrg, nil, 403, 7)
			if _, err := e.Client("connect", tok, "").RemoveMachineSecret(ctx, &managementv1.RemoveMachineSecretRequest{UserId: svc}); connect.CodeOf(err) != connect.CodeAborted {
				t.Fatalf("remove a missing secret over Connect: %v; want Aborted", err)
			}
			// With x-service-orgid the IAM_OWNER removes the other org's secret.
			rm, err := e.Client("grpc", tok, otherOrg).RemoveMachineSecret(ctx, &managementv1.RemoveMachineSecretRequest{UserId: foreign})
			if err != nil {
				t.Fatalf("RemoveMachineSecret over gRPC: %v", err)
			}
			usrWantWrite(t, "RemoveMachineSecret over gRPC", rm.GetDetails(), usrLast(t, e, foreign))
		})

		t.Run("keys", func(t *testing.T) {
			k2048, k2047 := usrKeys(t)
			keys := func(id string) string { return "/management/v1/users/" + id + "/keys" }
			q := &users.Queries{DB: e.DB}

			// Generated key pair: the private key is returned once, only the public key is stored.
			r := e.REST("POST", keys(svc), tok, "", map[string]any{"type": "KEY_TYPE_JSON"})
			if r.Status != 200 {
				t.Fatalf("AddMachineKey: %d %s", r.Status, r.Body)
			}
			genEv := usrLast(t, e, svc)
			usrWantWriteJSON(t, "AddMachineKey", r, genEv)
			genID := usrStr(r.JSON["keyId"])
			raw, err := base64.StdEncoding.DecodeString(usrStr(r.JSON["keyDetails"]))
			if err != nil {
				t.Fatalf("keyDetails: %v", err)
			}
			var file map[string]string
			if err := json.Unmarshal(raw, &file); err != nil || len(file) != 4 || file["type"] != "serviceaccount" || file["keyId"] != genID || file["userId"] != svc {
				t.Fatalf("key file %s (%v)", raw, err)
			}
			block, _ := pem.Decode([]byte(file["key"]))
			if block == nil || block.Type != "RSA PRIVATE KEY" {
				t.Fatalf("key file key is not a PKCS#1 PEM: %q", file["key"])
			}
			priv, err := x509.ParsePKCS1PrivateKey(block.Bytes)
			if err != nil || priv.N.BitLen() != 2048 {
				t.Fatalf("private key: %v", err)
			}
			k, err := q.MachineKey(ctx, genID)
			if err != nil || k.UserID != svc || k.OrgID != e.OrgID || k.PublicKey != usrPKIX(t, &priv.PublicKey) ||
				k.ExpirationDate == nil || !k.ExpirationDate.Equal(users.NoExpiry) {
				t.Fatalf("MachineKey: %+v %v; want the PKIX public key, no expiry", k, err)
			}
			if strings.Contains(string(genEv.Payload), "PRIVATE") {
				t.Fatal("the private key was stored in the event")
			}

			// A registered public key with an expiration date; no key file.
			exp := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
			res, err := e.Client("grpc", tok, "").AddMachineKey(ctx, &managementv1.AddMachineKeyRequest{
				UserId: svc, Type: managementv1.KeyType_KEY_TYPE_JSON, ExpirationDate: timestamppb.New(exp),
				PublicKey: []byte(usrPKIX(t, &k2048.PublicKey)),
			})
			if err != nil {
				t.Fatalf("AddMachineKey over gRPC: %v", err)
			}
			usrWantWrite(t, "AddMachineKey over gRPC", res.GetDetails(), usrLast(t, e, svc))
			if len(res.GetKeyDetails()) != 0 {
				t.Fatal("key details returned for a registered public key")
			}
			k, err = q.MachineKey(ctx, res.GetKeyId())
			if err != nil || k.PublicKey != usrPKIX(t, &k2048.PublicKey) || !k.ExpirationDate.Equal(exp) {
				t.Fatalf("registered key: %+v %v", k, err)
			}
			// PKCS#1 public keys are stored as PKIX.
			pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k2048.PublicKey)})
			r = e.REST("POST", keys(svc), tok, "", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": pkcs1})
			if r.Status != 200 {
				t.Fatalf("PKCS#1 public key: %d %s", r.Status, r.Body)
			}
			if k, _ := q.MachineKey(ctx, usrStr(r.JSON["keyId"])); k == nil || k.PublicKey != usrPKIX(t, &k2048.PublicKey) {
				t.Fatalf("PKCS#1 key stored as %+v", k)
			}
			// 10000 bytes is the limit.
			padded := usrPKIX(t, &k2048.PublicKey)
			padded += strings.Repeat("\n", 10000-len(padded))
			if r := e.REST("POST", keys(svc), tok, "", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte(padded)}); r.Status != 200 {
				t.Fatalf("public key of 10000 bytes: %d %s", r.Status, r.Body)
			}
			ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			privPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k2048)})
			bad := []struct {
				name string
				body map[string]any
			}{
				{"public key of 10001 bytes", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte(padded + "\n")}},
				{"2047-bit key", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte(usrPKIX(t, &k2047.PublicKey))}},
				{"EC key", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte(usrPKIX(t, &ecKey.PublicKey))}},
				{"private key", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": privPEM}},
				{"not PEM", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte("ssh-rsa AAAA")}},
				{"text before the PEM", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte("junk\n" + usrPKIX(t, &k2048.PublicKey))}},
				{"two PEM blocks", map[string]any{"type": "KEY_TYPE_JSON", "publicKey": []byte(usrPKIX(t, &k2048.PublicKey) + usrPKIX(t, &k2048.PublicKey))}},
				{"past expiration", map[string]any{"type": "KEY_TYPE_JSON", "expirationDate": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)}},
				{"unspecified type", map[string]any{}},
			}
			for _, tc := range bad {
				usrRefused(t, e, tc.name, "POST", keys(svc), tok, "", tc.body, 400, 3)
			}
			usrRefused(t, e, "human user", "POST", keys(human), tok, "", map[string]any{"type": "KEY_TYPE_JSON"}, 404, 5)
			usrRefused(t, e, "other org's machine", "POST", keys(foreign), tok, "", map[string]any{"type": "KEY_TYPE_JSON"}, 404, 5)
			usrRefused(t, e, "no role", "POST", keys(svc), plainTok, "", map[string]any{"type": "KEY_TYPE_JSON"}, 403, 7)

			// ListMachineKeys: newest first by default, metadata only.
			all := e.Events(svc)
			var added []string
			for _, ev := range all {
				if ev.Type == users.EventMachineKeyAdded {
					var p users.MachineKeyAdded
					_ = json.Unmarshal(ev.Payload, &p)
					added = append(added, p.KeyID)
				}
			}
			if len(added) != 4 {
				t.Fatalf("%d keys added; want 4", len(added))
			}
			list := e.REST("POST", keys(svc)+"/_search", tok, "", map[string]any{})
			result, _ := list.JSON["result"].([]any)
			det, _ := list.JSON["details"].(map[string]any)
			if list.Status != 200 || len(result) != 4 || det["totalResult"] != "4" {
				t.Fatalf("ListMachineKeys: %d %s", list.Status, list.Body)
			}
			for i, it := range result {
				key := it.(map[string]any)
				if key["id"] != added[3-i] || key["type"] != "KEY_TYPE_JSON" {
					t.Fatalf("key %d: %v; want %s (newest first)", i, key, added[3-i])
				}
			}
			if strings.Contains(string(list.Body), "PUBLIC KEY") {
				t.Fatal("ListMachineKeys returned key material")
			}
			if first := result[3].(map[string]any); first["expirationDate"] != "9999-12-31T23:59:59Z" {
				t.Fatalf("key without expiration lists %v; want 9999-12-31T23:59:59Z", first["expirationDate"])
			}
			seq, _ := usrLastUserEvent(t, e)
			if det["processedSequence"] != strconv.FormatUint(seq, 10) {
				t.Fatalf("processedSequence %v; want %d", det["processedSequence"], seq)
			}
			lres, err := e.Client("grpc-web", tok, "").ListMachineKeys(ctx, &managementv1.ListMachineKeysRequest{
				UserId: svc, Query: &managementv1.ListQuery{Offset: 1, Limit: 2, Asc: true},
			})
			if err != nil {
				t.Fatalf("ListMachineKeys over gRPC-web: %v", err)
			}
			if got := lres.GetResult(); len(got) != 2 || got[0].GetId() != added[1] || got[1].GetId() != added[2] || lres.GetDetails().GetTotalResult() != 4 {
				t.Fatalf("offset 1 limit 2 ascending: %v; want %v", got, added[1:3])
			}
			gk := lres.GetResult()[0]
			keyEv := all[0]
			for _, ev := range all {
				if strings.Contains(string(ev.Payload), gk.GetId()) {
					keyEv = ev
				}
			}
			usrWantRead(t, "key details", gk.GetDetails(), keyEv, keyEv)
			if !lres.GetResult()[0].GetExpirationDate().AsTime().Equal(exp) {
				t.Fatalf("expiration %v; want %v", lres.GetResult()[0].GetExpirationDate().AsTime(), exp)
			}
			usrRefused(t, e, "list with limit 1001", "POST", keys(svc)+"/_search", tok, "", map[string]any{"query": map[string]any{"limit": 1001}}, 400, 3)
			if r := e.REST("POST", keys(svc)+"/_search", tok, "", map[string]any{"query": map[string]any{"limit": 1000}}); r.Status != 200 {
				t.Fatalf("list with limit 1000: %d", r.Status)
			}
			usrRefused(t, e, "list a human's keys", "POST", keys(human)+"/_search", tok, "", map[string]any{}, 404, 5)
			usrRefused(t, e, "list other org's keys", "POST", keys(foreign)+"/_search", tok, "", map[string]any{}, 404, 5)

			// RemoveMachineKey.
			r = e.REST("DELETE", keys(svc)+"/"+genID, tok, "", nil)
			if r.Status != 200 {
				t.Fatalf("RemoveMachineKey: %d %s", r.Status, r.Body)
			}
			usrWantWriteJSON(t, "RemoveMachineKey", r, usrLast(t, e, svc))
			if _, err := q.MachineKey(ctx, genID); err == nil {
				t.Fatal("removed key still found")
			}
			usrRefused(t, e, "remove again", "DELETE", keys(svc)+"/"+genID, tok, "", nil, 404, 5)
			usrRefused(t, e, "key of another user", "DELETE", keys(human)+"/"+added[1], tok, "", nil, 404, 5)
			usrRefused(t, e, "key id of 201 characters", "DELETE", keys(svc)+"/"+strings.Repeat("1", 201), tok, "", nil, 400, 3)
			usrRefused(t, e, "remove without role", "DELETE", keys(svc)+"/"+added[1], plainTok, "", nil, 403, 7)
			rm, err := e.Client("connect", tok, "").RemoveMachineKey(ctx, &managementv1.RemoveMachineKeyRequest{UserId: svc, KeyId: added[1]})
			if err != nil {
				t.Fatalf("RemoveMachineKey over Connect: %v", err)
			}
			usrWantWrite(t, "RemoveMachineKey over Connect", rm.GetDetails(), usrLast(t, e, svc))

			e.Restart()
			list = e.REST("POST", keys(svc)+"/_search", tok, "", map[string]any{"query": map[string]any{"asc": true}})
			result, _ = list.JSON["result"].([]any)
			if len(result) != 2 || result[0].(map[string]any)["id"] != added[2] {
				t.Fatalf("keys after restart: %s", list.Body)
			}
			if k, err := q.MachineKey(ctx, added[3]); err != nil || k.UserID != svc {
				t.Fatalf("MachineKey after restart: %v", err)
			}
		})
	})
}
