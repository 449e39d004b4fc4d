package login

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/style.css
var styleCSS []byte

// webauthnJS runs the WebAuthn ceremony of a page with a data-webauthn
// form: the only script of the pages, loaded under a per-response nonce.
//
//go:embed assets/webauthn.js
var webauthnJS []byte

// page is the data of every template.
type page struct {
	Lang      string
	Title     string // message key
	RequestID string
	CSRF      string
	AppName   string
	LoginName string
	Error     string            // form-level error, translated
	Errors    map[string]string // field id -> translated error
	Form      map[string]string // values to re-fill
	Policy    []string
	Sessions  []session.Session
	// AllowRegister shows the registration link (the login policy).
	AllowRegister bool
	// IdPs are the identity provider buttons of the login name page.
	IdPs []idpButton
	// Taken: the identity\'s user name belongs to another account.
	Taken bool
	// External is the identity the link page would link (shown, so a
	// browser walked there by someone else shows whose identity it is).
	External *externalAccount
	// WebAuthn is a ceremony's options (JSON) for the page's form; a page
	// with them loads the ceremony script under Nonce.
	WebAuthn string
	Nonce    string
	// Links are the page's alternatives (another factor, another way in).
	Links []link
	// Account is the account page's content; Wide widens the card.
	Account *accountView
	Wide    bool
	// QR, OTPURI and Secret: a TOTP enrollment's generator.
	QR     template.HTML
	OTPURI template.URL
	Secret string
	Code   string // error page: the OAuth error code
	Detail string // error page: the error's description (English)
	Hint   string // error page: how to fix the request (English)
	// UserCode: the consent page approves a device showing this code.
	UserCode string
}

// link is a link to another page: its URL and its text's message key.
type link struct{ URL, Key string }

// externalAccount is an identity at an identity provider, as shown.
type externalAccount struct {
	Name, Email, Subject, Issuer string
}

// fieldData is one labelled input.
type fieldData struct {
	ID, Label, Type, Value, Autocomplete, Error, Describe string
	Required, Autofocus                                   bool
}

// optional fields of the registration form; every other field is required.
var optional = map[string]bool{"firstName": true, "lastName": true, "email": true}

var funcs = template.FuncMap{
	"t": translate,
	"field": func(id, label, typ, value, autocomplete, errMsg string, autofocus bool) fieldData {
		return fieldData{ID: id, Label: label, Type: typ, Value: value, Autocomplete: autocomplete,
			Error: errMsg, Required: !optional[id], Autofocus: autofocus || errMsg != ""}
	},
	"describe": func(f fieldData, id string) fieldData { f.Describe = id; return f },
}

// templates holds one parsed set per page (each page defines "content").
type templates map[string]*template.Template

func parseTemplates() (templates, error) {
	out := templates{}
	for _, name := range []string{"loginname", "password", "change", "select", "register", "error", "loggedout", "logout", "consent", "idplink", "mfa", "mfapassed", "mfainit", "mfacodes", "webauthn", "account", "resetrequest", "resetnew", "verifyemail", "userinit", "emailcode", "device", "devicedone"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/policy.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("login template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes a page; it renders into a buffer first so a template
// error becomes a clean 500 rather than half a page.
func (ts templates) render(w http.ResponseWriter, log *slog.Logger, status int, name string, p *page) {
	csp := pageCSP
	if p.WebAuthn != "" {
		// The one script, allowed by a nonce no other response shares.
		p.Nonce = secrets.RandomToken(18)
		csp += "; script-src 'nonce-" + p.Nonce + "'"
	}
	var buf bytes.Buffer
	if err := ts[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		log.Error("render login page", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	writePage(w, status, p.Lang, csp, buf.Bytes())
}

// pageCSP is the pages' Content-Security-Policy: no script but a WebAuthn
// page's one, under its nonce.
const pageCSP = "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'"

// writePage writes a rendered page with the pages' headers.
func writePage(w http.ResponseWriter, status int, lang, csp string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Language", lang)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", csp)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// policyLines describes a password policy in lang.
func policyLines(lang string, p *directoryv1.PasswordPolicy) []string {
	if p == nil {
		return nil
	}
	var out []string
	if p.GetMinLength() > 0 {
		out = append(out, translate(lang, "policy.min", p.GetMinLength()))
	}
	for _, c := range []struct {
		on  bool
		key string
	}{{p.GetHasUppercase(), "policy.upper"}, {p.GetHasLowercase(), "policy.lower"}, {p.GetHasNumber(), "policy.number"}, {p.GetHasSymbol(), "policy.symbol"}} {
		if c.on {
			out = append(out, translate(lang, c.key))
		}
	}
	return out
}
