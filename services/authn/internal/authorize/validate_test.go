package authorize

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// stepCase is one row of a step's table: the query, the client (of
// fuzzClients) and the expected refusal (code and description), or none
// and a check of what the step made.
type stepCase struct {
	name   string
	query  string
	client string
	code   string // "" when the step must pass
	desc   string
	check  func(t *testing.T, s *steps)
}

// runSteps runs step on each case, with the request as the steps before
// it left it (response type from the query, scopes openid).
func runSteps(t *testing.T, step func(*steps) func(context.Context) error, tokens Tokens, cases []stepCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			client := tc.client
			if client == "" {
				client = "web"
			}
			c := fuzzClients[client]
			rt, _ := normalizeResponseType(q.Get("response_type"))
			s := &steps{v: &Validator{Directory: fuzzDirectory{}, Tokens: tokens, Issuer: "https://id.example"}, p: Params(q), client: c,
				target: &Target{RedirectURI: c.GetRedirectUris()[0]},
				req:    &Request{ClientID: client, ResponseType: rt, Scopes: []string{"openid"}}}
			err = step(s)(context.Background())
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.check != nil {
					tc.check(t, s)
				}
				return
			}
			if oe := oauth.As(err); err == nil || oe.Code != tc.code || oe.Description != tc.desc {
				t.Fatalf("error %v; want %s: %s", err, tc.code, tc.desc)
			}
		})
	}
}

func TestClientStep(t *testing.T) {
	t.Parallel()
	v := &Validator{Directory: fuzzDirectory{}}
	for _, tc := range []struct{ query, desc string }{
		{"", "client_id is missing"},
		{"client_id=web&client_id=spa", "parameter client_id is repeated"},
		{"client_id=nobody", "unknown client_id"},
	} {
		q, _ := url.ParseQuery(tc.query)
		if _, err := v.client(context.Background(), Params(q)); oauth.As(err).Description != tc.desc {
			t.Errorf("%q: %v; want %q", tc.query, err, tc.desc)
		}
	}
	if c, err := v.client(context.Background(), Params{"client_id": {"spa"}}); err != nil || c.GetClientId() != "spa" {
		t.Fatalf("spa: %v, %v", c, err)
	}
	down := &Validator{Directory: downDirectory{}}
	if _, err := down.client(context.Background(), Params{"client_id": {"web"}}); oauth.As(err).Code != oauth.TemporarilyUnavailable {
		t.Fatalf("directory down: %v; want temporarily_unavailable", err)
	}
}

func TestRedirectURIStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ client, uri, desc string }{
		{"web", "", "redirect_uri is missing"},
		{"web", "https://rp.example/other", "redirect_uri is not registered for this client"},
		{"web", "https://rp.example/cb?tenant=2", "redirect_uri is not registered for this client"},
		{"web", "https://rp.example/cb", ""},
		{"spa", "http://127.0.0.1:5173/cb", ""}, // a native app's loopback port (RFC 8252 §7.3)
		{"web", "http://127.0.0.1:5173/cb", "redirect_uri is not registered for this client"},
	} {
		p := Params{"redirect_uri": {tc.uri}}
		if tc.uri == "" {
			p = Params{}
		}
		got, err := checkRedirectURI(fuzzClients[tc.client], p)
		if tc.desc == "" && (err != nil || got != tc.uri) || tc.desc != "" && oauth.As(err).Description != tc.desc {
			t.Errorf("%s %q: %q, %v; want error %q", tc.client, tc.uri, got, err, tc.desc)
		}
	}
}

func TestResponseTypeAndModeStep(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error { s.req = nil; return s.responseTypeAndMode }, nil, []stepCase{
		{name: "missing", query: "state=s", code: oauth.InvalidRequest, desc: "response_type is missing"},
		{name: "unknown", query: "response_type=token", code: oauth.UnsupportedResponseType, desc: `response_type "token" is not supported`},
		{name: "not registered", query: "response_type=id_token", code: oauth.UnauthorizedClient, desc: `the client may not use response_type "id_token"`},
		{name: "repeated", query: "response_type=code&nonce=a&nonce=b", code: oauth.InvalidRequest, desc: "parameter nonce is repeated"},
		{name: "state repeated", query: "response_type=code&state=a&state=b", code: oauth.InvalidRequest, desc: "parameter state is repeated"},
		{name: "form_post", query: "response_type=code&response_mode=form_post", code: oauth.InvalidRequest, desc: `response_mode "form_post" is not supported (query, fragment)`},
		{name: "tokens in a query", client: "spa", query: "response_type=id_token&response_mode=query", code: oauth.InvalidRequest,
			desc: `response_mode query is not allowed for response_type "id_token": tokens never go in a query`},
		{name: "code, fragment", query: "response_type=code&response_mode=fragment&state=s&client_id=web", check: func(t *testing.T, s *steps) {
			if !s.target.Fragment || s.target.State != "s" || s.req.ResponseType != ResponseCode || s.req.ClientID != "web" || s.req.RedirectURI != "https://rp.example/cb" {
				t.Fatalf("target %+v, request %+v", s.target, s.req)
			}
		}},
		{name: "implicit, any order", client: "spa", query: "response_type=token+id_token", check: func(t *testing.T, s *steps) {
			if !s.target.Fragment || s.req.ResponseType != ResponseIDTokenAndToken {
				t.Fatalf("target %+v, request %+v", s.target, s.req)
			}
		}},
	})
}

func TestScopeStep(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error { s.req.Scopes = nil; return s.scope }, nil, []stepCase{
		{name: "missing", code: oauth.InvalidRequest, desc: "scope is missing"},
		{name: "tab", query: "scope=openid%09email", code: oauth.InvalidScope, desc: "scope values are separated by single spaces"},
		{name: "no openid", query: "scope=email", code: oauth.InvalidScope, desc: "scope must contain openid"},
		{name: "two organizations", query: "scope=openid+urn:gatehouse:iam:org:id:o1+urn:gatehouse:iam:org:id:o2", code: oauth.InvalidScope,
			desc: "the organization scope must name exactly one organization"},
		{name: "organization", query: "scope=openid+email+urn:gatehouse:iam:org:id:o1", check: func(t *testing.T, s *steps) {
			if s.req.OrgID != "o1" || !slices.Equal(s.req.Scopes, []string{"openid", "email", "urn:gatehouse:iam:org:id:o1"}) {
				t.Fatalf("request %+v", s.req)
			}
		}},
	})
}

func TestPKCEStep(t *testing.T) {
	t.Parallel()
	const challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
	runSteps(t, func(s *steps) func(context.Context) error { return s.pkce }, nil, []stepCase{
		{name: "method alone", query: "response_type=code&code_challenge_method=S256", code: oauth.InvalidRequest, desc: "code_challenge_method without code_challenge"},
		{name: "plain", query: "response_type=code&code_challenge=" + challenge + "&code_challenge_method=plain", code: oauth.InvalidRequest, desc: "code_challenge_method must be S256"},
		{name: "no method", query: "response_type=code&code_challenge=" + challenge, code: oauth.InvalidRequest, desc: "code_challenge_method must be S256"},
		{name: "short", query: "response_type=code&code_challenge=abc&code_challenge_method=S256", code: oauth.InvalidRequest, desc: "code_challenge must be 43 to 128 characters of base64url"},
		{name: "public client without", client: "spa", query: "response_type=code", code: oauth.InvalidRequest, desc: "code_challenge is required for this client (PKCE, S256)"},
		{name: "implicit with", client: "spa", query: "response_type=id_token&code_challenge=" + challenge + "&code_challenge_method=S256", code: oauth.InvalidRequest,
			desc: "code_challenge is only for response_type code"},
		{name: "confidential without", query: "response_type=code"},
		{name: "public with", client: "spa", query: "response_type=code&code_challenge=" + challenge + "&code_challenge_method=S256", check: func(t *testing.T, s *steps) {
			if s.req.CodeChallenge != challenge {
				t.Fatalf("challenge %q", s.req.CodeChallenge)
			}
		}},
	})
}

func TestNonceStep(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error { return s.nonce }, nil, []stepCase{
		{name: "implicit without", client: "spa", query: "response_type=id_token", code: oauth.InvalidRequest, desc: `nonce is required for response_type "id_token"`},
		{name: "code without", query: "response_type=code"},
		{name: "implicit with", client: "spa", query: "response_type=id_token&nonce=n", check: func(t *testing.T, s *steps) {
			if s.req.Nonce != "n" {
				t.Fatalf("nonce %q", s.req.Nonce)
			}
		}},
	})
}

func TestPromptAndMaxAgeSteps(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := s.prompt(ctx); err != nil {
				return err
			}
			return s.maxAgeAndHints(ctx)
		}
	}, nil, []stepCase{
		{name: "none with login", query: "prompt=none+login", code: oauth.InvalidRequest, desc: "prompt none cannot be combined with other values"},
		{name: "negative max_age", query: "max_age=-1", code: oauth.InvalidRequest, desc: "max_age must be a non-negative integer"},
		{name: "max_age not a number", query: "max_age=1h", code: oauth.InvalidRequest, desc: "max_age must be a non-negative integer"},
		{name: "unknown prompt ignored", query: "prompt=login+foo+consent&max_age=0&login_hint=+al+&ui_locales=de+fr", check: func(t *testing.T, s *steps) {
			r := s.req
			if !slices.Equal(r.Prompt, []string{PromptLogin, PromptConsent}) || r.MaxAge == nil || *r.MaxAge != 0 || r.LoginHint != "al" ||
				!slices.Equal(r.UILocales, []string{"de", "fr"}) {
				t.Fatalf("request %+v", r)
			}
		}},
	})
}

func TestReservedScopesStep(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error {
		s.req.Scopes = []string{"openid", "urn:gatehouse:iam:org:project:id:gatehouse:aud"}
		return s.reservedScopes
	}, nil, []stepCase{
		// web is no admin client: the management audience is never its.
		{name: "management audience", code: oauth.InvalidScope, desc: `scope "urn:gatehouse:iam:org:project:id:gatehouse:aud" is not allowed for this client`},
	})
}

func TestIDTokenHintStep(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error { return s.idTokenHint }, fuzzTokens{}, []stepCase{
		{name: "none"},
		{name: "invalid", query: "id_token_hint=x", code: oauth.InvalidRequest, desc: "id_token_hint is not a valid ID token of this issuer"},
	})
	runSteps(t, func(s *steps) func(context.Context) error { return s.idTokenHint }, downTokens{}, []stepCase{
		{name: "tokens down", query: "id_token_hint=x", code: oauth.TemporarilyUnavailable, desc: "the tokens service is unavailable, try again"},
	})
}

func TestOrganizationStep(t *testing.T) {
	t.Parallel()
	runSteps(t, func(s *steps) func(context.Context) error {
		s.req.OrgID = s.p.first("org")
		s.req.Scopes = append(s.req.Scopes, s.p["scope"]...)
		return s.organization
	}, nil, []stepCase{
		{name: "the client's own", check: func(t *testing.T, s *steps) {
			if s.req.OrgID != "o1" {
				t.Fatalf("org %q", s.req.OrgID)
			}
		}},
		{name: "active", query: "org=o1"},
		{name: "inactive", query: "org=o2", code: oauth.InvalidScope, desc: "the organization of the scope is not active"},
		{name: "unknown", query: "org=o3", code: oauth.InvalidScope, desc: "the organization of the scope does not exist"},
		{name: "unknown identity provider", query: "scope=urn:gatehouse:iam:org:idp:id:i1", code: oauth.InvalidScope,
			desc: "the identity provider of the scope is unknown, inactive or of another organization"},
	})
}

// downDirectory and downTokens cannot answer.
type downDirectory struct{ fuzzDirectory }

func (downDirectory) GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error) {
	return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
}

type downTokens struct{ Tokens }

func (downTokens) VerifyIDTokenHint(context.Context, string, bool) (Hint, error) {
	return Hint{}, connect.NewError(connect.CodeUnavailable, errors.New("down"))
}
