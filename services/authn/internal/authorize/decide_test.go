package authorize

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	alice := session.Session{ID: "sa", UserID: "alice", OrgID: "o1", LoginName: "alice@o1.example", AuthTime: now.Add(-time.Hour)}
	bob := session.Session{ID: "sb", UserID: "bob", OrgID: "o1", LoginName: "bob@o1.example", AuthTime: now.Add(-time.Minute)}
	carol := session.Session{ID: "sc", UserID: "carol", OrgID: "o2", LoginName: "carol@o2.example", AuthTime: now}
	fresh := session.Session{ID: "sf", UserID: "frank", OrgID: "o1", LoginName: "frank@o1.example", AuthTime: now}
	age := func(n int64) *int64 { return &n }
	rows := []struct {
		name     string
		req      Request
		sessions []session.Session
		step     Step
		session  string
		err      string
	}{
		{"no session", Request{}, nil, StepLogin, "", ""},
		{"no session, prompt none", Request{Prompt: []string{"none"}}, nil, StepFail, "", "login_required"},
		{"one session", Request{}, []session.Session{alice}, StepComplete, "sa", ""},
		{"other org's session only", Request{}, []session.Session{carol}, StepLogin, "", ""},
		{"two sessions", Request{}, []session.Session{alice, bob}, StepSelect, "", ""},
		{"two sessions, prompt none", Request{Prompt: []string{"none"}}, []session.Session{alice, bob}, StepFail, "", "interaction_required"},
		{"login_hint picks", Request{LoginHint: "BOB", Prompt: []string{"none"}}, []session.Session{alice, bob}, StepComplete, "sb", ""},
		{"login_hint of no session", Request{LoginHint: "dave", Prompt: []string{"none"}}, []session.Session{alice}, StepFail, "", "login_required"},
		{"id_token_hint picks", Request{HintSubject: "alice"}, []session.Session{alice, bob}, StepComplete, "sa", ""},
		{"id_token_hint of no session", Request{HintSubject: "dave"}, []session.Session{alice}, StepLogin, "", ""},
		{"prompt login", Request{Prompt: []string{"login"}}, []session.Session{alice}, StepLogin, "", ""},
		{"prompt login with hint", Request{Prompt: []string{"login"}, HintSubject: "alice"}, []session.Session{alice}, StepPassword, "sa", ""},
		{"prompt select_account", Request{Prompt: []string{"select_account"}}, []session.Session{alice}, StepSelect, "", ""},
		{"prompt create", Request{Prompt: []string{"create"}}, []session.Session{alice}, StepRegister, "", ""},
		{"max_age met", Request{MaxAge: age(3600)}, []session.Session{alice}, StepComplete, "sa", ""},
		{"max_age exceeded", Request{MaxAge: age(3599)}, []session.Session{alice}, StepPassword, "sa", ""},
		{"max_age exceeded, prompt none", Request{MaxAge: age(60), Prompt: []string{"none"}}, []session.Session{alice}, StepFail, "", "login_required"},
		{"max_age 0", Request{MaxAge: age(0)}, []session.Session{fresh}, StepPassword, "sf", ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req := row.req
			if req.OrgID == "" {
				req.OrgID = "o1"
			}
			d := Decide(&req, row.sessions, nil, now)
			got := ""
			if d.Session != nil {
				got = d.Session.ID
			}
			code := ""
			if d.Err != nil {
				code = d.Err.Code
			}
			if d.Step != row.step || got != row.session || code != row.err {
				t.Errorf("got step %d session %q error %q; want %d %q %q", d.Step, got, code, row.step, row.session, row.err)
			}
		})
	}
}

// TestDecideExpiredSessions: an expired session is no session: it never
// answers, prompt=none gets login_required, and an interactive request
// gets the login page pre-filled with its account when exactly one would
// have matched.
func TestDecideExpiredSessions(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	alice := session.Session{ID: "sa", UserID: "alice", OrgID: "o1", LoginName: "alice@o1.example", AuthTime: now.Add(-11 * time.Hour)}
	bob := session.Session{ID: "sb", UserID: "bob", OrgID: "o1", LoginName: "bob@o1.example", AuthTime: now.Add(-3 * time.Hour)}
	carol := session.Session{ID: "sc", UserID: "carol", OrgID: "o2", LoginName: "carol@o2.example", AuthTime: now.Add(-3 * time.Hour)}
	dave := session.Session{ID: "sd", UserID: "dave", OrgID: "o1", LoginName: "dave@o1.example", AuthTime: now.Add(-time.Minute)}
	rows := []struct {
		name          string
		req           Request
		live, expired []session.Session
		step          Step
		session       string
		desc          string // the error's description, when it fails
		loginName     string
	}{
		{"expired only", Request{}, nil, []session.Session{alice}, StepLogin, "", "", "alice@o1.example"},
		{"expired only, prompt none", Request{Prompt: []string{"none"}}, nil, []session.Session{alice}, StepFail, "", "the session has expired", ""},
		{"two expired", Request{}, nil, []session.Session{alice, bob}, StepLogin, "", "", ""},
		{"two expired, login_hint picks", Request{LoginHint: "bob"}, nil, []session.Session{alice, bob}, StepLogin, "", "", "bob@o1.example"},
		{"expired of another org", Request{}, nil, []session.Session{carol}, StepLogin, "", "", ""},
		{"expired of another org, prompt none", Request{Prompt: []string{"none"}}, nil, []session.Session{carol}, StepFail, "", "the user is not signed in", ""},
		{"live beside expired", Request{}, []session.Session{dave}, []session.Session{alice}, StepComplete, "sd", "", ""},
		{"live beside expired, prompt none", Request{Prompt: []string{"none"}}, []session.Session{dave}, []session.Session{alice, bob}, StepComplete, "sd", "", ""},
		{"id_token_hint of expired", Request{HintSubject: "alice"}, []session.Session{dave}, []session.Session{alice}, StepLogin, "", "", "alice@o1.example"},
		{"id_token_hint of expired, prompt none", Request{HintSubject: "alice", Prompt: []string{"none"}}, []session.Session{dave},
			[]session.Session{alice}, StepFail, "", "the session has expired", ""},
		{"prompt login", Request{Prompt: []string{"login"}, HintSubject: "alice"}, nil, []session.Session{alice}, StepLogin, "", "", ""},
		{"prompt select_account", Request{Prompt: []string{"select_account"}}, nil, []session.Session{alice}, StepSelect, "", "", ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req := row.req
			req.OrgID = "o1"
			d := Decide(&req, row.live, row.expired, now)
			got, desc := "", ""
			if d.Session != nil {
				got = d.Session.ID
			}
			if d.Err != nil {
				desc = d.Err.Description
				if d.Err.Code != "login_required" {
					t.Errorf("error %s; want login_required", d.Err.Code)
				}
			}
			if d.Step != row.step || got != row.session || desc != row.desc || d.LoginName != row.loginName {
				t.Errorf("got step %d session %q error %q login name %q; want %d %q %q %q",
					d.Step, got, desc, d.LoginName, row.step, row.session, row.desc, row.loginName)
			}
		})
	}
}

func TestTargetURL(t *testing.T) {
	q := &Target{RedirectURI: "https://rp.example/cb?tenant=a", State: "x y"}
	if got := q.URL(map[string][]string{"code": {"c"}}); got != "https://rp.example/cb?code=c&state=x+y&tenant=a" {
		t.Errorf("query target: got %s", got)
	}
	f := &Target{RedirectURI: "https://rp.example/cb", State: "s", Fragment: true}
	if got := f.URL(map[string][]string{"id_token": {"t"}}); got != "https://rp.example/cb#id_token=t&state=s" {
		t.Errorf("fragment target: got %s", got)
	}
}

// Which requests need the person's confirmation before a management token:
// every admin client's request for the management audience (RFC 8252 §8.6
// for a public one; a plain navigation for a confidential one).
func TestConfirmsManagement(t *testing.T) {
	mgmt := []string{"openid", "urn:gatehouse:iam:org:project:id:gatehouse:aud"}
	for _, tc := range []struct {
		name string
		req  Request
		want bool
	}{
		{"admin client, code", Request{AdminClient: true, ResponseType: ResponseCode, Scopes: mgmt}, true},
		{"confidential admin client, implicit", Request{AdminClient: true, ResponseType: "id_token token", Scopes: mgmt}, true},
		{"confidential admin client, code", Request{AdminClient: true, ResponseType: ResponseCode, Scopes: mgmt}, true},
		{"admin client without the management audience", Request{AdminClient: true, ResponseType: ResponseCode, Scopes: []string{"openid"}}, false},
		{"ordinary client", Request{ResponseType: ResponseCode, Scopes: mgmt}, false},
	} {
		if got := tc.req.ConfirmsManagement(); got != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}

// failingTokens answers every code and implicit grant with err.
type failingTokens struct {
	Tokens
	err error
}

func (f failingTokens) CreateAuthorizationCode(context.Context, CodeGrant) (string, error) {
	return "", f.err
}
func (f failingTokens) CreateImplicitTokens(context.Context, ImplicitGrant) (ImplicitTokens, error) {
	return ImplicitTokens{}, f.err
}

// What the tokens service answers reaches the client as: an outage, or a
// moment's disagreement on the policy (its view of a grant, a client or an
// admin mark a second behind or ahead of authn's), is temporarily_unavailable,
// which a client retries; anything else is a server error.
func TestCompleteMapsTheTokensServicesAnswers(t *testing.T) {
	for _, tc := range []struct {
		code connect.Code
		want string
	}{
		{connect.CodeUnavailable, oauth.TemporarilyUnavailable},
		{connect.CodeDeadlineExceeded, oauth.TemporarilyUnavailable},
		{connect.CodePermissionDenied, oauth.TemporarilyUnavailable},
		{connect.CodeFailedPrecondition, oauth.TemporarilyUnavailable},
		{connect.CodeInternal, oauth.ServerError},
		{connect.CodeInvalidArgument, oauth.ServerError},
	} {
		for _, rt := range []string{ResponseCode, "id_token"} {
			req := &Request{ResponseType: rt, RedirectURI: "https://rp.example/cb", Scopes: []string{"openid"}, Nonce: "n"}
			_, fail := Complete(context.Background(), failingTokens{err: connect.NewError(tc.code, errors.New("x"))}, req, session.Session{})
			if fail == nil || fail.Err.Code != tc.want {
				t.Errorf("%s, %v: %+v; want %s", rt, tc.code, fail, tc.want)
			}
		}
	}
}
