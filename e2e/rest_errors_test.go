package e2e

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// TestRESTMalformedRequestsAre400: requests the REST transcoding cannot
// map answer 400 INVALID_ARGUMENT, never 500 (these were the only 5xx in
// ~300k fuzzed requests).
func TestRESTMalformedRequestsAre400(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	token := strings.TrimSpace(c.ok("token"))
	auth := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}
	for _, tc := range []struct{ name, method, path, body string }{
		{"body on GET", "GET", "/management/v1/orgs/me", `{"x":1}`},
		{"body on DELETE", "DELETE", "/management/v1/orgs/me/members/123", `{"x":1}`},
		{"invalid UTF-8 in a path id", "GET", "/management/v1/users/%ff%fe", ""},
		{"invalid UTF-8 in a DELETE path", "DELETE", "/management/v1/idps/%c3%28", ""},
	} {
		res, body := do(t, tc.method, p.base+tc.path, strings.NewReader(tc.body), auth)
		if res.StatusCode != 400 || !strings.Contains(body, `"code":3`) {
			t.Errorf("%s: %d %s; want 400 with code 3 (INVALID_ARGUMENT)", tc.name, res.StatusCode, body)
		}
	}
}

// TestConnectWithoutProtocolHeader: a unary Connect call without the
// optional Connect-Protocol-Version header (connectrpc.com's curl recipe)
// is served, not 404.
func TestConnectWithoutProtocolHeader(t *testing.T) {
	p, _, c := startCLIServer(t, nil)
	token := strings.TrimSpace(c.ok("token"))
	res, body := do(t, "POST", p.base+"/gatehouse.management.v1.ManagementService/GetMyOrg", strings.NewReader("{}"),
		map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"})
	if res.StatusCode != 200 || !strings.Contains(body, `"name":"Gatehouse"`) {
		t.Fatalf("Connect without Connect-Protocol-Version: %d %s", res.StatusCode, body)
	}
}

// TestGRPCWebText: browsers' base64 gRPC-Web (application/grpc-web-text)
// reaches the management API through edge: a GetMyOrg frame in, the
// organization and an OK trailer out, base64 encoded.
func TestGRPCWebText(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	p := startProc(t, config.RoleEdge, map[string]string{"GATEHOUSE_DATA_DIR": dir, "GATEHOUSE_ADDR": addr, "GATEHOUSE_ISSUER": issuer})
	_, tok := operatorToken(t, p.base, dir, issuer)
	frame := base64.StdEncoding.EncodeToString([]byte{0, 0, 0, 0, 0}) // an empty GetMyOrgRequest
	res, body := do(t, "POST", p.base+"/gatehouse.management.v1.ManagementService/GetMyOrg", strings.NewReader(frame), map[string]string{
		"Content-Type": "application/grpc-web-text+proto", "Authorization": "Bearer " + str(tok["access_token"]), "X-Grpc-Web": "1"})
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/grpc-web-text") {
		t.Fatalf("grpc-web-text GetMyOrg: %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		t.Fatalf("response is not base64: %v: %q", err, body)
	}
	var data, trailer []byte
	for len(raw) >= 5 {
		n := int(binary.BigEndian.Uint32(raw[1:5]))
		if len(raw) < 5+n {
			t.Fatalf("truncated frame")
		}
		if raw[0]&0x80 != 0 {
			trailer = raw[5 : 5+n]
		} else {
			data = raw[5 : 5+n]
		}
		raw = raw[5+n:]
	}
	if !strings.Contains(strings.ToLower(string(trailer)), "grpc-status: 0") && !strings.Contains(strings.ToLower(string(trailer)), "grpc-status:0") {
		t.Fatalf("trailer %q; want grpc-status 0", trailer)
	}
	if len(data) == 0 {
		t.Fatalf("no organization in the response")
	}
}
