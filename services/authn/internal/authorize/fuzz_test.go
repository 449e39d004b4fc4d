package authorize

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

// fuzzDirectory knows two OIDC apps of org "o1": "web" (confidential,
// code) and "spa" (public: PKCE, code and implicit), and organizations
// o1 (active) and o2 (inactive).
type fuzzDirectory struct{}

var fuzzClients = map[string]*directoryv1.Client{
	"web": {ClientId: "web", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, OrgId: "o1", Active: true,
		RedirectUris: []string{"https://rp.example/cb", "https://rp.example/cb?tenant=1"}, ResponseTypes: []string{ResponseCode},
		GrantTypes: []string{"authorization_code"}, AuthMethod: directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC},
	"spa": {ClientId: "spa", Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, OrgId: "o1", Active: true,
		RedirectUris: []string{"https://spa.example/", "http://127.0.0.1/cb"}, ResponseTypes: []string{ResponseCode, ResponseIDToken, ResponseIDTokenAndToken},
		GrantTypes: []string{"authorization_code", "implicit"}, AuthMethod: directoryv1.AuthMethod_AUTH_METHOD_NONE, AppType: "native"},
}

func (fuzzDirectory) GetClient(_ context.Context, r *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	c, ok := fuzzClients[r.GetClientId()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such client"))
	}
	return &directoryv1.GetClientResponse{Client: c}, nil
}

func (fuzzDirectory) GetOrg(_ context.Context, r *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error) {
	switch r.GetOrgId() {
	case "o1":
		return &directoryv1.GetOrgResponse{Active: true}, nil
	case "o2":
		return &directoryv1.GetOrgResponse{}, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such org"))
}

func (fuzzDirectory) GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such user"))
}

func (fuzzDirectory) GetIdP(context.Context, *directoryv1.GetIdPRequest) (*directoryv1.GetIdPResponse, error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such idp"))
}

type fuzzTokens struct{ Tokens }

func (fuzzTokens) VerifyIDTokenHint(context.Context, string, bool) (Hint, error) {
	return Hint{}, connect.NewError(connect.CodeInvalidArgument, errors.New("not an ID token"))
}

// FuzzValidate: whatever the query, Validate never panics, never sends
// anything (a response or an error) to a redirect_uri the client did not
// register, never accepts a public client's code request without PKCE,
// and never puts tokens in a query.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		"client_id=web&redirect_uri=https%3A%2F%2Frp.example%2Fcb&response_type=code&scope=openid&state=s",
		"client_id=spa&redirect_uri=https%3A%2F%2Fspa.example%2F&response_type=code&scope=openid+profile&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256",
		"client_id=spa&redirect_uri=https%3A%2F%2Fspa.example%2F&response_type=id_token+token&scope=openid&nonce=n&response_mode=query",
		"client_id=spa&redirect_uri=http%3A%2F%2F127.0.0.1%3A5555%2Fcb&response_type=code&scope=openid",
		"client_id=spa&redirect_uri=http%3A%2F%2F127.0.0.1%3A5555%2Fcb&response_type=code&scope=openid&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256",
		"client_id=spa&redirect_uri=https%3A%2F%2Fspa.example%2F&response_type=token+id_token&scope=openid&nonce=n",
		"client_id=web&redirect_uri=https%3A%2F%2Fevil.example%2Fcb&response_type=code&scope=openid",
		"client_id=web&redirect_uri=https%3A%2F%2Frp.example%2Fcb&redirect_uri=https%3A%2F%2Fevil.example&response_type=code&scope=openid",
		"client_id=web&redirect_uri=https%3A%2F%2Frp.example%2Fcb&response_type=code&scope=openid+urn%3Agatehouse%3Aiam%3Aorg%3Aid%3Ao2&max_age=-1&prompt=none+login",
		"client_id=web&redirect_uri=https%3A%2F%2Frp.example%2Fcb%3Ftenant%3D1&response_type=token&scope=openid&request_uri=x&id_token_hint=e",
	} {
		f.Add(s)
	}
	v := &Validator{Directory: fuzzDirectory{}, Tokens: fuzzTokens{}, Issuer: "https://issuer.example"}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		req, fail := v.Validate(context.Background(), Params(q))
		if (req == nil) == (fail == nil) {
			t.Fatalf("Validate(%q) = %v, %v; want exactly one", query, req, fail)
		}
		client := fuzzClients[first(q, "client_id")]
		registered := func(uri string) bool {
			if client == nil {
				return false
			}
			if slices.Contains(client.GetRedirectUris(), uri) {
				return true
			}
			// RFC 8252 §7.3: a native app's loopback URI with any port.
			u, err := url.Parse(uri)
			return err == nil && client.GetAppType() == "native" && u.Scheme == "http" && u.Hostname() == "127.0.0.1" &&
				slices.Contains(client.GetRedirectUris(), "http://127.0.0.1"+u.EscapedPath())
		}
		if fail != nil {
			if fail.Err == nil {
				t.Fatalf("Validate(%q): a failure without an error", query)
			}
			if fail.Target != nil && !registered(fail.Target.RedirectURI) {
				t.Fatalf("Validate(%q): error sent to unregistered redirect_uri %q", query, fail.Target.RedirectURI)
			}
			return
		}
		if client == nil || !registered(req.RedirectURI) {
			t.Fatalf("Validate(%q): accepted for client %q and redirect_uri %q", query, req.ClientID, req.RedirectURI)
		}
		if req.ResponseType == ResponseCode && client.GetAuthMethod() == directoryv1.AuthMethod_AUTH_METHOD_NONE && req.CodeChallenge == "" {
			t.Fatalf("Validate(%q): a public client's code request without PKCE", query)
		}
		if req.Implicit() && (!req.Target().Fragment || req.Nonce == "") {
			t.Fatalf("Validate(%q): implicit response without fragment or nonce", query)
		}
		if !slices.Contains(req.Scopes, "openid") || strings.Contains(strings.Join(req.Scopes, " "), "\n") {
			t.Fatalf("Validate(%q): scopes %q", query, req.Scopes)
		}
		if req.OrgID != "o1" {
			t.Fatalf("Validate(%q): org %q; only the active o1 can be signed in to", query, req.OrgID)
		}
	})
}

func first(q url.Values, name string) string {
	if v := q[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
