package login

import (
	"bytes"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// The code page is rendered once per variant and kept split at the
// values that change with every login: every login with an authenticator
// app gets it in the password's answer, right after argon2id has emptied
// the caches, where html/template's reflective execution cost about
// 190 µs a login, a quarter of the whole second-factor step
// (bench/README, "The second factor's cost").
//
// The kept output is html/template's own: the template runs with a
// sentinel in each slot, and a render puts the values where the
// sentinels were. That equals a full render only while a value passes
// every escaper of its slot unchanged, so each slot admits an alphabet
// on which html/template's escapers (text, attribute and URL query) are
// the identity, and any other value is rendered in full. The variant's
// key is everything else the template reads; a page with anything the
// key does not cover is rendered in full too. TestSlottedCodePage and
// FuzzSlottedCodePage compare the two renders byte for byte.

// codeSlots are the code page's per-login values, in sentinel order.
const (
	slotRequestID = iota
	slotCSRF
	slotState
	slotLoginName
	codeSlots
)

// maxVariants bounds the kept renders; the key's values are messages and
// flags, so the pages have far fewer.
const maxVariants = 64

// codeKey is everything but the slots that the code page shows.
type codeKey struct {
	lang, title, err, codeErr, typ, otp, webauthn string
}

// slotted is a variant's output: parts[0] slot[0] parts[1] … parts[n].
type slotted struct {
	parts [][]byte
	slots []int
}

// codePages keeps the code page's variants.
type codePages struct {
	tmpl     templates
	sentinel string // followed by the slot's letter, 'a' + slot
	mu       sync.RWMutex
	variants map[codeKey]*slotted
}

func newCodePages(t templates) *codePages {
	return &codePages{tmpl: t, sentinel: "ghslot" + hex.EncodeToString([]byte(secrets.RandomToken(12))), variants: map[codeKey]*slotted{}}
}

// render writes pg as the "mfa" template would.
func (c *codePages) render(w http.ResponseWriter, log *slog.Logger, status int, pg *page) {
	key, vals, ok := codeVariant(pg)
	if !ok {
		c.tmpl.render(w, log, status, "mfa", pg)
		return
	}
	s := c.variant(key, pg)
	if s == nil {
		c.tmpl.render(w, log, status, "mfa", pg)
		return
	}
	n := 0
	for _, part := range s.parts {
		n += len(part)
	}
	for _, i := range s.slots {
		n += len(vals[i])
	}
	body := make([]byte, 0, n)
	for i, part := range s.parts {
		body = append(body, part...)
		if i < len(s.slots) {
			body = append(body, vals[s.slots[i]]...)
		}
	}
	writePage(w, status, pg.Lang, pageCSP, body)
}

// codeVariant is pg's key and slot values; ok is false when pg holds
// anything the key does not cover or a value its slot does not admit.
func codeVariant(pg *page) (codeKey, [codeSlots]string, bool) {
	vals := [codeSlots]string{slotRequestID: pg.RequestID, slotCSRF: pg.CSRF, slotState: pg.Form[stateField], slotLoginName: pg.LoginName}
	if pg.WebAuthn != "" || pg.Nonce != "" || pg.Wide || len(pg.Links) > 0 || pg.Account != nil || pg.External != nil ||
		len(pg.Policy) > 0 || len(pg.Sessions) > 0 || len(pg.IdPs) > 0 || pg.QR != "" || pg.OTPURI != "" || pg.Secret != "" ||
		pg.AllowRegister || pg.Taken || pg.Code != "" || pg.Detail != "" || pg.Hint != "" || pg.UserCode != "" {
		return codeKey{}, vals, false
	}
	for k := range pg.Errors {
		if k != "code" {
			return codeKey{}, vals, false
		}
	}
	for k := range pg.Form {
		switch k {
		case "type", "otp", "webauthn", stateField:
		default:
			return codeKey{}, vals, false
		}
	}
	// The template shows the state's field and links only when there is
	// one: a sentinel would always show them.
	if !token(vals[slotRequestID]) || !token(vals[slotCSRF]) || !token(vals[slotState]) || !plainText(vals[slotLoginName]) {
		return codeKey{}, vals, false
	}
	return codeKey{lang: pg.Lang, title: pg.Title, err: pg.Error, codeErr: pg.Errors["code"],
		typ: pg.Form["type"], otp: pg.Form["otp"], webauthn: pg.Form["webauthn"]}, vals, true
}

// token admits a non-empty identifier of letters, digits, '-' and '_'
// (request ids, CSRF tokens, sealed states): unchanged by every escaper.
func token(s string) bool {
	if s == "" || len(s) > maxState {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// plainText admits text that html/template's text escaper leaves as it
// is: valid UTF-8 without NUL, quotes, '&', '+', '<' or '>'.
func plainText(s string) bool {
	return len(s) <= 1024 && utf8.ValidString(s) && !strings.ContainsAny(s, "\x00\"'&+<>")
}

// variant is key's kept output, made from pg on first use; nil when the
// template fails or the variants are full.
func (c *codePages) variant(key codeKey, pg *page) *slotted {
	c.mu.RLock()
	s, ok := c.variants[key]
	c.mu.RUnlock()
	if ok {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.variants[key]; ok {
		return s
	}
	if len(c.variants) >= maxVariants {
		return nil
	}
	sp := *pg
	sp.Errors, sp.Form = maps.Clone(pg.Errors), maps.Clone(pg.Form)
	sp.RequestID, sp.CSRF, sp.LoginName = c.sentinel+"a", c.sentinel+"b", c.sentinel+"d"
	sp.Form[stateField] = c.sentinel + "c"
	var buf bytes.Buffer
	if err := c.tmpl["mfa"].ExecuteTemplate(&buf, "layout", &sp); err != nil {
		return nil
	}
	if s = split(buf.Bytes(), c.sentinel); s != nil {
		c.variants[key] = s
	}
	return s
}

// split cuts out at each sentinel followed by a slot's letter; nil if a
// sentinel is followed by anything else.
func split(out []byte, sentinel string) *slotted {
	s := &slotted{}
	for {
		i := bytes.Index(out, []byte(sentinel))
		if i < 0 {
			s.parts = append(s.parts, out)
			return s
		}
		rest := out[i+len(sentinel):]
		if len(rest) == 0 || rest[0] < 'a' || int(rest[0]-'a') >= codeSlots {
			return nil
		}
		s.parts = append(s.parts, out[:i])
		s.slots = append(s.slots, int(rest[0]-'a'))
		out = rest[1:]
	}
}
