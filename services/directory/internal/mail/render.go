package mail

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"
)

// Kinds of message.
const (
	KindPasswordReset     = "password_reset"
	KindEmailVerification = "email_verification"
	KindInitialization    = "initialization"
	// Notices: to the old address when the address changes, to the
	// address when the password changes.
	KindEmailChanged    = "email_changed"
	KindPasswordChanged = "password_changed"
)

// Kinds lists every kind of message.
var Kinds = []string{KindPasswordReset, KindEmailVerification, KindInitialization, KindEmailChanged, KindPasswordChanged}

// Languages the messages are written in; others get English.
var Languages = []string{"en", "de"}

// Data fills a message's templates. It is sealed in the outbox (Link and
// Code are one-time secrets).
type Data struct {
	Lang      string    `json:"lang"`
	Org       string    `json:"org"`
	Name      string    `json:"name"`
	LoginName string    `json:"loginName,omitempty"`
	Link      string    `json:"link,omitempty"`
	Code      string    `json:"code,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	// NewEmail and When describe a change a notice tells of.
	NewEmail string    `json:"newEmail,omitempty"`
	When     time.Time `json:"when,omitzero"`
}

// Rendered is a message's subject and bodies.
type Rendered struct {
	Subject, Text, HTML string
}

//go:embed templates
var templateFS embed.FS

var (
	textTemplates = texttemplate.Must(texttemplate.New("").Funcs(texttemplate.FuncMap{"stamp": stamp}).
			ParseFS(templateFS, "templates/*.txt"))
	htmlTemplates = htmltemplate.Must(htmltemplate.New("").Funcs(htmltemplate.FuncMap{"stamp": stamp}).
			ParseFS(templateFS, "templates/*.html"))
)

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// Lang picks the first of prefs that messages are written in, else en.
func Lang(prefs ...string) string {
	for _, p := range prefs {
		p = strings.ToLower(strings.TrimSpace(p))
		if i := strings.IndexAny(p, "-_"); i > 0 {
			p = p[:i]
		}
		for _, l := range Languages {
			if p == l {
				return l
			}
		}
	}
	return "en"
}

// Render fills kind's templates in d.Lang. Each kind has, per language,
// kind.lang.txt defining "subject" and "text", and kind.lang.html
// defining "html" (inside layout.html's "page").
func Render(kind string, d Data) (Rendered, error) {
	lang := Lang(d.Lang)
	name := kind + "." + lang
	var subj, text, html bytes.Buffer
	if err := textTemplates.ExecuteTemplate(&subj, name+".subject", d); err != nil {
		return Rendered{}, fmt.Errorf("mail: %s subject: %w", name, err)
	}
	if err := textTemplates.ExecuteTemplate(&text, name+".text", d); err != nil {
		return Rendered{}, fmt.Errorf("mail: %s text: %w", name, err)
	}
	page, err := htmlTemplates.Clone()
	if err != nil {
		return Rendered{}, err
	}
	if _, err := page.New("content").Parse(`{{template "` + name + `.html" .}}`); err != nil {
		return Rendered{}, err
	}
	if err := page.ExecuteTemplate(&html, "layout", struct {
		Data
		Lang, Subject string
	}{d, lang, subj.String()}); err != nil {
		return Rendered{}, fmt.Errorf("mail: %s html: %w", name, err)
	}
	return Rendered{Subject: strings.TrimSpace(subj.String()), Text: text.String(), HTML: html.String()}, nil
}
