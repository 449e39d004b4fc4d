package authorize

import (
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Step is what answers a request next.
type Step int

// Steps.
const (
	StepComplete Step = iota // answer with Decision.Session
	StepLogin                // ask for the login name (and then the password)
	StepPassword             // ask Decision.Session's user for the password again
	StepSelect               // let the user choose among the browser's sessions
	StepRegister             // show the registration form
	StepFail                 // prompt=none could not complete: Decision.Err
)

// Decision is the outcome of Decide.
type Decision struct {
	Step    Step
	Session *session.Session
	Err     *oauth.Error // StepFail
	// LoginName pre-fills the login page (StepLogin): the account of the
	// one expired session the request would have used, if any.
	LoginName string
}

// Decide chooses how to answer req given the browser's live sessions
// (already checked to belong to active users) and its expired ones,
// following OIDC Core §3.1.2.1: prompt=none never shows a page
// (login_required without a usable session, interaction_required when the
// user would have to choose), prompt=login always asks for the password,
// max_age forces a login when the session's auth_time is older, an
// id_token_hint or login_hint selects a session. An expired session
// counts as none; it only names the account the login page offers.
func Decide(req *Request, live, expired []session.Session, now time.Time) Decision {
	candidates := matching(req, live)
	none := req.HasPrompt(PromptNone)
	switch {
	case req.HasPrompt(PromptCreate):
		return Decision{Step: StepRegister}
	case req.HasPrompt(PromptSelectAccount):
		return Decision{Step: StepSelect}
	case req.HasPrompt(PromptLogin):
		if len(candidates) == 1 && req.HintSubject != "" {
			return Decision{Step: StepPassword, Session: &candidates[0]}
		}
		return Decision{Step: StepLogin}
	case len(candidates) == 0:
		lapsed := matching(req, expired)
		if none {
			if len(lapsed) > 0 {
				return Decision{Step: StepFail, Err: oauth.New(oauth.LoginRequired, "the session has expired")}
			}
			return Decision{Step: StepFail, Err: oauth.New(oauth.LoginRequired, "the user is not signed in")}
		}
		if len(lapsed) == 1 {
			return Decision{Step: StepLogin, LoginName: lapsed[0].LoginName}
		}
		return Decision{Step: StepLogin}
	case len(candidates) > 1:
		if none {
			return Decision{Step: StepFail, Err: oauth.New(oauth.InteractionRequired, "the user must choose an account")}
		}
		return Decision{Step: StepSelect}
	}
	s := candidates[0]
	if !Fresh(req, s, now) {
		if none {
			return Decision{Step: StepFail, Err: oauth.New(oauth.LoginRequired, "the authentication is older than max_age")}
		}
		return Decision{Step: StepPassword, Session: &s}
	}
	return Decision{Step: StepComplete, Session: &s}
}

// matching returns the sessions that may answer req: of its organization,
// and of the user its id_token_hint or login_hint names.
func matching(req *Request, sessions []session.Session) []session.Session {
	var out []session.Session
	for _, s := range sessions {
		if s.OrgID != req.OrgID {
			continue // users sign in to the request's organization only
		}
		if req.HintSubject != "" && s.UserID != req.HintSubject {
			continue
		}
		if req.LoginHint != "" && !matchesHint(s.LoginName, req.LoginHint) {
			continue // the hint names the user: another user's session never answers
		}
		out = append(out, s)
	}
	return out
}

// Fresh reports whether s satisfies req's max_age; max_age=0 always asks
// for a new authentication (like prompt=login).
func Fresh(req *Request, s session.Session, now time.Time) bool {
	if req.MaxAge == nil {
		return true
	}
	if *req.MaxAge == 0 {
		return false
	}
	return !now.After(s.AuthTime.Add(time.Duration(*req.MaxAge) * time.Second))
}

// NeedsLogin reports whether s may not answer req without a new
// authentication: prompt=login asks for one at or after the request
// started (whole seconds, as a session's auth_time is stored), max_age
// for one recent enough (Fresh). Every answer with an existing session
// checks it (Flow.answer), whichever page led there.
func NeedsLogin(req *Request, s session.Session, now time.Time) bool {
	if req.HasPrompt(PromptLogin) && s.AuthTime.Unix() < req.StartedAt.Unix() {
		return true
	}
	return !Fresh(req, s, now)
}

// matchesHint compares a login_hint with a session's login name
// (userName@domain), accepting the bare user name.
func matchesHint(loginName, hint string) bool {
	user, _, _ := strings.Cut(loginName, "@")
	return strings.EqualFold(loginName, hint) || strings.EqualFold(user, hint)
}
