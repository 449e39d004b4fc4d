package login

import (
	"net/http"

	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// sessionsFor lists the browser's usable sessions in the request's org.
func (p *Pages) sessionsFor(r *http.Request, f *flow) ([]session.Session, error) {
	all, err := p.Flow.Sessions(r.Context(), f.ua.ID)
	if err != nil {
		return nil, err
	}
	var out []session.Session
	for _, s := range all {
		if s.OrgID == f.req.OrgID {
			out = append(out, s)
		}
	}
	return out, nil
}

// selectPage lists this browser's sessions (prompt=select_account, or
// several sessions and no hint); without any it goes to the login page.
func (p *Pages) selectPage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	sessions, err := p.sessionsFor(r, f)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	if len(sessions) == 0 {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	pg := f.page("select.title")
	pg.Sessions = sessions
	p.tmpl.render(w, p.Logger, http.StatusOK, "select", pg)
}

// selectSubmit answers with the chosen session, or asks for its password
// when the request needs a new login (prompt=login, max_age).
func (p *Pages) selectSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "sessionID")
	if f == nil {
		return
	}
	sessions, err := p.sessionsFor(r, f)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	for _, s := range sessions {
		if s.ID != f.form["sessionID"] {
			continue
		}
		if authorize.NeedsLogin(f.req, s, p.Now()) {
			if err := p.Store.SetAuthRequestUser(r.Context(), f.ar.ID, s.LoginName, s.UserID); err != nil {
				p.internal(w, r, f.lang, err)
				return
			}
			redirect(w, r, authorize.PathPassword, f.ar.ID)
			return
		}
		p.Flow.Finish(w, r, f.req, f.ar, s)
		return
	}
	pg := f.page("select.title")
	pg.Sessions = sessions
	pg.Error = translate(f.lang, "err.sessionGone")
	p.tmpl.render(w, p.Logger, http.StatusBadRequest, "select", pg)
}
