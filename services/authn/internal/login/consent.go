package login

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// The consent page: a user of an organization that an app's project is
// granted to (or anyone, with prompt=consent) sees what the app asks for,
// and agrees or declines. Agreement is remembered per user, app and scope
// set; declining sends access_denied to the app.

// consentSession finds the browser's session of the user the request
// waits for.
func (p *Pages) consentSession(r *http.Request, f *flow) (session.Session, bool, error) {
	sessions, err := p.sessionsFor(r, f)
	if err != nil {
		return session.Session{}, false, err
	}
	for _, s := range sessions {
		if s.UserID == f.ar.UserID {
			return s, true, nil
		}
	}
	return session.Session{}, false, nil
}

// scopeLines describes the requested scopes in the page's language. The
// organization scope only says where the user signs in, so it grants the
// app nothing to list.
func scopeLines(lang string, scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if strings.HasPrefix(s, authorize.OrgScopePrefix) {
			continue
		}
		key := "scope." + s
		if _, ok := messages["en"][key]; ok {
			out = append(out, translate(lang, key))
		} else {
			out = append(out, translate(lang, "scope.other", s))
		}
	}
	return out
}

func (p *Pages) consentPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	if _, ok, err := p.consentSession(r, f); err != nil {
		p.internal(w, r, f.lang, err)
		return
	} else if !ok {
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.sessionGone")
		return
	}
	pg := f.page("consent.title")
	pg.Policy = scopeLines(f.lang, f.req.Scopes)
	if f.req.Device != nil {
		pg.Title, pg.UserCode = "device.consent.title", f.req.Device.UserCode
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "consent", pg)
}

// consentSubmit records the agreement and answers the request, or sends
// access_denied; the request completes once either way.
func (p *Pages) consentSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "decision")
	if f == nil {
		return
	}
	ctx := r.Context()
	s, ok, err := p.consentSession(r, f)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	if !ok {
		p.messagePage(w, r, f.lang, http.StatusBadRequest, "err.sessionGone")
		return
	}
	if err := p.Store.ConsumeAuthRequest(ctx, f.ar.ID); err != nil {
		p.messagePage(w, r, f.lang, http.StatusNotFound, "err.request")
		return
	}
	if f.req.Device != nil {
		p.deviceDecided(w, r, f, s)
		return
	}
	if f.form["decision"] != "accept" {
		p.Flow.Fail(w, r, f.req.UILocales, f.req.Fail(oauth.AccessDenied, "the user declined"))
		return
	}
	if err := p.Store.AddConsent(ctx, s.UserID, f.req.ClientID, f.req.GrantIDs[s.OrgID], f.req.Scopes, p.Now()); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.Flow.Answer(w, r, f.req, s)
}

// deviceDecided records a device's denial, or answers an approval (the
// flow's checks of the session, a second factor, then the approval).
func (p *Pages) deviceDecided(w http.ResponseWriter, r *http.Request, f *flow, s session.Session) {
	if f.form["decision"] == "accept" {
		p.Flow.Answer(w, r, f.req, s)
		return
	}
	err := p.Flow.Tokens.DecideDevice(r.Context(), authorize.DeviceDecision{ID: f.req.Device.ID})
	if err != nil && !errors.Is(err, authorize.ErrNoDevice) {
		p.internal(w, r, f.lang, err)
		return
	}
	http.Redirect(w, r, authorize.DeviceDoneURL(false, f.lang), http.StatusSeeOther)
}
