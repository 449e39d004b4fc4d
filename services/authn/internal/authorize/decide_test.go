package authorize

import (
	"testing"
	"time"

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
			d := Decide(&req, row.sessions, now)
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
