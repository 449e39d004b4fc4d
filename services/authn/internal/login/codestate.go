package login

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// The code page carries its login's state sealed (AES-GCM under the
// master key's login-state subkey) in its form and in its links to the
// other factors, instead of in the pending request: the password's answer
// writes nothing before it shows the page, and the code's POST reads no
// pending request before the directory checks the code. Every login with
// an authenticator app passes this step, so each store round trip it
// spares counts (bench/README, "The second factor's cost").
//
// The state is as strong as the pending request it stands for: it opens
// only for the request and the browser (its cookie, and on a POST its
// CSRF token) it was sealed for, and only until the request expires. The
// sign-in after a right code consumes the pending request in its own
// transaction (session.Store.SignIn), so a request completed, cancelled or
// pruned meanwhile answers "already completed" as before. A page that
// needs more than the code form (a security key, a recovery code's
// "continue") records the state in the pending request first (loadFactor).

// stateField names the sealed state in the code form and its links.
const stateField = "state"

// stateAAD binds a sealed state to this use of the login-state subkey.
var stateAAD = []byte("gatehouse login code form v1")

// codeState is what a sealed state holds: the pending request (its id,
// browser, expiry, login name and parameters) and the first factor its
// user passed.
type codeState struct {
	RequestID   string                `json:"r"`
	UserAgentID string                `json:"u"`
	ExpiresAt   int64                 `json:"e"` // Unix milliseconds
	LoginName   string                `json:"n,omitempty"`
	FirstFactor authorize.FirstFactor `json:"f"`
	Params      json.RawMessage       `json:"p"`
}

// sealState is f's request with ff's first factor, sealed for the code
// form; "" when the pages have no key or ff names no user (the page then
// works from the pending request alone).
func (p *Pages) sealState(f *flow, ff authorize.FirstFactor) string {
	if p.StateKey == nil || ff.UserID == "" || len(f.ar.Params) == 0 {
		return ""
	}
	b, err := json.Marshal(codeState{RequestID: f.ar.ID, UserAgentID: f.ua.ID, ExpiresAt: f.ar.ExpiresAt.UnixMilli(),
		LoginName: f.ar.LoginName, FirstFactor: ff, Params: f.ar.Params})
	if err != nil {
		return ""
	}
	sealed, err := p.StateKey.Encrypt(b, stateAAD)
	if err != nil {
		return ""
	}
	if out := base64.RawURLEncoding.EncodeToString(sealed); len(out) <= maxState {
		return out
	}
	return "" // too long for the links: the pending request holds it
}

// openState is the state sealed in s for v's request and browser, unless
// it is missing, altered, another request's or browser's, or expired.
func (p *Pages) openState(s string, v *visitor) (codeState, bool) {
	if p.StateKey == nil || s == "" || len(s) > maxState {
		return codeState{}, false
	}
	sealed, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return codeState{}, false
	}
	b, err := p.StateKey.Decrypt(sealed, stateAAD)
	if err != nil {
		return codeState{}, false
	}
	var st codeState
	if json.Unmarshal(b, &st) != nil || st.FirstFactor.UserID == "" || len(st.Params) == 0 ||
		st.RequestID != v.id || st.UserAgentID != v.ua.ID || !p.Now().Before(time.UnixMilli(st.ExpiresAt)) {
		return codeState{}, false
	}
	return st, true
}

// maxState bounds a state (it travels in the code page's links too); a
// login whose request's parameters would not fit keeps its state in the
// pending request.
const maxState = 8 << 10

// flowFromState is the step of v's browser the code form's state
// describes, without reading the pending request (nil if its parameters
// do not parse).
func (p *Pages) flowFromState(r *http.Request, v *visitor, st codeState) *flow {
	var req authorize.Request
	if json.Unmarshal(st.Params, &req) != nil {
		return nil
	}
	ar := session.AuthRequest{ID: st.RequestID, UserAgentID: st.UserAgentID, Params: st.Params, LoginName: st.LoginName,
		UserID: st.FirstFactor.UserID, ExpiresAt: time.UnixMilli(st.ExpiresAt)}
	return &flow{ua: v.ua, req: &req, ar: ar, form: v.form, lang: Language(req.UILocales, r.Header.Get("Accept-Language"))}
}
