package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2/clientcredentials"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
)

// mdHeaders sends an access token and, when set, a request id with every
// call.
type mdHeaders struct{ token, requestID string }

func (h mdHeaders) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+h.token)
		if h.requestID != "" {
			req.Header().Set("X-Request-Id", h.requestID)
		}
		return next(ctx, req)
	}
}

func (h mdHeaders) WrapStreamingClient(n connect.StreamingClientFunc) connect.StreamingClientFunc {
	return n
}

func (h mdHeaders) WrapStreamingHandler(n connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return n
}

// mdClient is a management client through edge speaking protocol: "grpc"
// over h2c (as grpcurl and gRPC SDKs do inside a cluster), "grpc-web" or
// "connect" over HTTP/1.1.
func mdClient(t *testing.T, protocol, base, token string) managementv1connect.ManagementServiceClient {
	t.Helper()
	return mdClientWithID(t, protocol, base, token, "")
}

// mdClientWithID is mdClient sending X-Request-Id requestID.
func mdClientWithID(t *testing.T, protocol, base, token, requestID string) managementv1connect.ManagementServiceClient {
	t.Helper()
	opts := []connect.ClientOption{connect.WithInterceptors(mdHeaders{token: token, requestID: requestID})}
	hc := http.DefaultClient
	switch protocol {
	case "grpc":
		hc = &http.Client{Transport: rpc.NewH2CTransport()}
		opts = append(opts, connect.WithGRPC())
	case "grpc-web":
		opts = append(opts, connect.WithGRPCWeb())
	case "connect":
		opts = append(opts, connect.WithProtoJSON())
	default:
		t.Fatalf("unknown protocol %q", protocol)
	}
	return managementv1connect.NewManagementServiceClient(hc, base, opts...)
}

// mdProtocols are the RPC protocols every step below runs over.
var mdProtocols = []string{"grpc", "grpc-web", "connect"}

// TestDistributedManagement is TestBootstrapToManagement against the
// distributed deployment of TestDistributed: four processes, PostgreSQL and
// Redis. The operator takes the bootstrap key file from the directory
// process's data dir, gets a management token by the JWT profile grant
// through edge, and manages users over REST, gRPC (h2c) and gRPC-web through
// edge. Stopping directory takes the management API down (503) but not
// the tokens service's routes.
func TestDistributedManagement(t *testing.T) {
	d := startDistributed(t, testutil.RedisURL(t))
	issuer, directory, edge := d.issuer, d.directory, d.edge
	// The key file is written by the directory process, into its data dir.
	kf, tok := operatorToken(t, edge.base, d.directoryData, issuer)
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatalf("discovery through edge: %v", err)
	}
	idToken, _ := tok["id_token"].(string)
	idt, err := provider.Verifier(&oidc.Config{ClientID: kf.UserID}).Verify(ctx, idToken)
	if err != nil || idt.Subject != kf.UserID {
		t.Fatalf("id_token: %v %v", idt, err)
	}
	access, _ := tok["access_token"].(string)

	// REST through edge.
	status, org := restJSON(t, "GET", edge.base+"/management/v1/orgs/me", access, nil)
	orgObj, _ := org["org"].(map[string]any)
	if status != 200 || orgObj["name"] != "Gatehouse" {
		t.Fatalf("REST GetMyOrg with the bootstrap token: %d %v", status, org)
	}
	orgID, _ := orgObj["id"].(string)

	// The same organization over every RPC protocol, through edge: edge
	// logs the call (gRPC arriving as h2c) and directory serves it.
	for _, p := range mdProtocols {
		id := "md-get-my-org-" + p
		res, err := mdClientWithID(t, p, edge.base, access, id).GetMyOrg(ctx, &managementv1.GetMyOrgRequest{})
		if err != nil || res.GetOrg().GetId() != orgID || res.GetOrg().GetName() != "Gatehouse" {
			t.Fatalf("%s GetMyOrg through edge: %v %v; want org %s", p, res, err, orgID)
		}
		const path = "/gatehouse.management.v1.ManagementService/GetMyOrg"
		line := requestLine(edge.log, id)
		if line == nil || line["service"] != "directory" || line["path"] != path {
			t.Fatalf("%s GetMyOrg: edge access log %v; want %s routed to directory", p, line, path)
		}
		if p == "grpc" && line["proto"] != "HTTP/2.0" {
			t.Fatalf("gRPC through edge arrived as %v; want HTTP/2.0 (h2c)", line["proto"])
		}
		if dl := requestLine(directory.log, id); dl == nil || dl["path"] != path {
			t.Fatalf("%s GetMyOrg: directory access log %v; want %s", p, dl, path)
		}
	}

	// Without the management audience the token is refused, on every protocol.
	_, plain := postForm(t, edge.base+"/oauth/v2/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {jwtProfileAssertion(t, kf, issuer)},
		"scope":      {"openid"},
	})
	plainAccess, _ := plain["access_token"].(string)
	if plainAccess == "" {
		t.Fatalf("JWT profile grant without the management scope: %v", plain)
	}
	if status, body := restJSON(t, "GET", edge.base+"/management/v1/orgs/me", plainAccess, nil); status != 401 {
		t.Fatalf("REST with a token without the management audience: %d %v; want 401", status, body)
	}
	for _, p := range mdProtocols {
		_, err := mdClient(t, p, edge.base, plainAccess).GetMyOrg(ctx, &managementv1.GetMyOrgRequest{})
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s with a token without the management audience: %v; want Unauthenticated", p, err)
		}
	}

	// A machine user created over gRPC, its secret generated over gRPC-web.
	grpcAdmin := mdClient(t, "grpc", edge.base, access)
	mu, err := grpcAdmin.AddMachineUser(ctx, &managementv1.AddMachineUserRequest{
		UserName: "reporter", Name: "Reporting job", AccessTokenType: managementv1.AccessTokenType_ACCESS_TOKEN_TYPE_JWT})
	if err != nil {
		t.Fatalf("gRPC AddMachineUser: %v", err)
	}
	userID := mu.GetUserId()
	if d := mu.GetDetails(); d.GetSequence() == 0 || d.GetResourceOwner() != orgID {
		t.Fatalf("gRPC AddMachineUser details %v; want a sequence and owner %s", d, orgID)
	}
	sec, err := mdClient(t, "grpc-web", edge.base, access).GenerateMachineSecret(ctx,
		&managementv1.GenerateMachineSecretRequest{UserId: userID})
	if err != nil {
		t.Fatalf("gRPC-web GenerateMachineSecret: %v", err)
	}
	list, err := mdClient(t, "connect", edge.base, access).ListUsers(ctx, &managementv1.ListUsersRequest{
		Queries: []*managementv1.UserQuery{{Query: &managementv1.UserQuery_UserNameQuery{
			UserNameQuery: &managementv1.UserNameQuery{UserName: "reporter"}}}}})
	if err != nil || len(list.GetResult()) != 1 || list.GetResult()[0].GetId() != userID ||
		!list.GetResult()[0].GetMachine().GetHasSecret() {
		t.Fatalf("Connect ListUsers: %v %v; want the reporter with a secret", list, err)
	}

	cc := clientcredentials.Config{
		ClientID: sec.GetClientId(), ClientSecret: sec.GetClientSecret(),
		TokenURL: provider.Endpoint().TokenURL, Scopes: []string{"urn:gatehouse:iam:org:project:id:gatehouse:aud"},
	}
	if !strings.HasPrefix(cc.TokenURL, issuer) {
		t.Fatalf("discovered token endpoint %s is not on edge %s", cc.TokenURL, issuer)
	}
	ccTok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("client_credentials through edge: %v", err)
	}
	// The machine user has no role yet: authenticated, but forbidden.
	if status, body := restJSON(t, "GET", edge.base+"/management/v1/users/"+userID, ccTok.AccessToken, nil); status != 403 {
		t.Fatalf("REST with the role-less machine token: %d %v; want 403", status, body)
	}
	for _, p := range mdProtocols {
		_, err := mdClient(t, p, edge.base, ccTok.AccessToken).GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: userID})
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("%s with the role-less machine token: %v; want PermissionDenied", p, err)
		}
	}
	if status, body := restJSON(t, "POST", edge.base+"/management/v1/orgs/me/members", access, map[string]any{
		"userId": userID, "roles": []string{"ORG_USER_MANAGER"}}); status != 200 {
		t.Fatalf("REST AddOrgMember: %d %v", status, body)
	}
	if status, body := restJSON(t, "GET", edge.base+"/management/v1/users/"+userID, ccTok.AccessToken, nil); status != 200 {
		t.Fatalf("REST with the ORG_USER_MANAGER machine token: %d %v", status, body)
	}
	for _, p := range mdProtocols {
		u, err := mdClient(t, p, edge.base, ccTok.AccessToken).GetUserByID(ctx, &managementv1.GetUserByIDRequest{Id: userID})
		if err != nil || u.GetUser().GetUserName() != "reporter" {
			t.Fatalf("%s with the ORG_USER_MANAGER machine token: %v %v", p, u, err)
		}
	}
	bad := cc
	bad.ClientSecret = "wrong"
	if _, err := bad.Token(ctx); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("wrong secret: %v; want invalid_client", err)
	}

	// Directory down: the management API answers 503 with a retry hint on
	// every protocol; the tokens service's routes keep working.
	directory.stop(t)
	res, body := do(t, "GET", edge.base+"/management/v1/orgs/me", nil, map[string]string{"Authorization": "Bearer " + access})
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "temporarily_unavailable") {
		t.Fatalf("REST with directory down: %d %q (Retry-After %q); want 503", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	for _, p := range mdProtocols {
		_, err := mdClient(t, p, edge.base, access).GetMyOrg(ctx, &managementv1.GetMyOrgRequest{})
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("%s with directory down: %v; want Unavailable", p, err)
		}
	}
	res, body = do(t, "GET", edge.base+"/oauth/v2/keys", nil, nil)
	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	if res.StatusCode != 200 || json.Unmarshal([]byte(body), &jwks) != nil || len(jwks.Keys) == 0 {
		t.Fatalf("/oauth/v2/keys with directory down: %d %s; want 200 with keys", res.StatusCode, body)
	}
	if res, body := do(t, "GET", edge.base+"/.well-known/openid-configuration", nil, nil); res.StatusCode != 200 {
		t.Fatalf("discovery with directory down: %d %s; want 200", res.StatusCode, body)
	}
}
