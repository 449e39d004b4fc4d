package login

import (
	"crypto/subtle"
	"errors"
	"net/http"

	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// The device flow's pages (RFC 8628 §3.3): the person types the code the
// device shows (verification_uri_complete fills it in, and the person
// still confirms it), signs in as for any application (an existing
// session, the login pages, external identity providers, second factors),
// and approves or denies on the consent page, which shows the code again.
// Wrong codes count per browser (session.DeviceAttempts) and, at edge,
// per address.

// devicePage asks for the user code.
func (p *Pages) devicePage(w http.ResponseWriter, r *http.Request) {
	lang := Language([]string{r.URL.Query().Get("ui_locales")}, r.Header.Get("Accept-Language"))
	ua, err := p.Browsers.Ensure(r.Context(), w, r)
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	pg := &page{Lang: lang, Title: "device.title", CSRF: ua.CSRFToken, Errors: map[string]string{},
		Form: map[string]string{"userCode": r.URL.Query().Get("user_code")}}
	p.tmpl.render(w, p.Logger, http.StatusOK, "device", pg)
}

// deviceSubmit finds the device authorization and runs its request.
func (p *Pages) deviceSubmit(w http.ResponseWriter, r *http.Request) {
	lang := Language([]string{r.URL.Query().Get("ui_locales")}, r.Header.Get("Accept-Language"))
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		p.messagePage(w, r, lang, http.StatusBadRequest, "err.request")
		return
	}
	ua, err := p.Browsers.Find(ctx, r)
	if errors.Is(err, session.ErrNotFound) {
		p.messagePage(w, r, lang, http.StatusBadRequest, "err.cookie")
		return
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(ua.CSRFToken)) != 1 {
		p.messagePage(w, r, lang, http.StatusForbidden, "err.csrf")
		return
	}
	typed := r.PostForm.Get("userCode")
	pg := &page{Lang: lang, Title: "device.title", CSRF: ua.CSRFToken, Errors: map[string]string{}, Form: map[string]string{"userCode": typed}}
	now := p.Now()
	blocked, err := p.Store.DeviceBlocked(ctx, ua.ID, now)
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	if blocked {
		pg.Error = translate(lang, "device.blocked")
		p.tmpl.render(w, p.Logger, http.StatusTooManyRequests, "device", pg)
		return
	}
	d, err := p.Flow.Tokens.DeviceAuthorization(ctx, typed)
	if errors.Is(err, authorize.ErrNoDevice) {
		if err := p.Store.DeviceFailed(ctx, ua.ID, now); err != nil {
			p.internal(w, r, lang, err)
			return
		}
		pg.Errors["userCode"] = translate(lang, "device.invalid")
		p.tmpl.render(w, p.Logger, http.StatusBadRequest, "device", pg)
		return
	}
	if err != nil {
		p.internal(w, r, lang, err)
		return
	}
	req, oerr := p.Flow.Validator.DeviceRequest(ctx, d, []string{lang})
	if oerr != nil {
		p.Flow.Fail(w, r, []string{lang}, &authorize.Failure{Err: oerr})
		return
	}
	p.Flow.Run(w, r, req)
}

// deviceDone tells the person what the device gets.
func (p *Pages) deviceDone(w http.ResponseWriter, r *http.Request) {
	lang := Language([]string{r.URL.Query().Get("ui_locales")}, r.Header.Get("Accept-Language"))
	title, msg := "device.denied.title", "device.denied"
	if r.URL.Query().Get("result") == "approved" {
		title, msg = "device.approved.title", "device.approved"
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "devicedone", &page{Lang: lang, Title: title, Error: translate(lang, msg)})
}
