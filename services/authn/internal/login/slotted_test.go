package login

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// codePage is a code page as renderCode builds it.
func codePage(lang, typ, otp, webauthn, formErr, codeErr, requestID, csrf, state, loginName, appName string) *page {
	pg := &page{Lang: lang, Title: "mfa.title", RequestID: requestID, CSRF: csrf, AppName: appName, LoginName: loginName,
		Errors: map[string]string{}, Form: map[string]string{"type": typ, stateField: state}}
	if otp != "" {
		pg.Form["otp"] = otp
	}
	if webauthn != "" {
		pg.Form["webauthn"] = webauthn
	}
	if codeErr != "" {
		pg.Errors["code"] = codeErr
	}
	pg.Error = formErr
	return pg
}

// testCodePages keeps the code page's variants of the parsed templates.
func testCodePages(t testing.TB) *codePages {
	t.Helper()
	tmpl, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	return newCodePages(tmpl)
}

// renders returns pg rendered in full and as a kept variant of c.
func renders(t testing.TB, c *codePages, pg *page) (full, kept *httptest.ResponseRecorder) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	copyOf := func() *page {
		cp := *pg
		cp.Errors, cp.Form = maps.Clone(pg.Errors), maps.Clone(pg.Form)
		return &cp
	}
	full, kept = httptest.NewRecorder(), httptest.NewRecorder()
	c.tmpl.render(full, log, http.StatusUnauthorized, "mfa", copyOf())
	c.render(kept, log, http.StatusUnauthorized, copyOf())
	return full, kept
}

// sameAsFull fails t unless pg's kept render equals its full one, and
// returns the kept one.
func sameAsFull(t testing.TB, c *codePages, pg *page) *httptest.ResponseRecorder {
	t.Helper()
	full, kept := renders(t, c, pg)
	if full.Code != kept.Code {
		t.Errorf("status: full %d, kept %d", full.Code, kept.Code)
	}
	for _, h := range []string{"Content-Type", "Cache-Control", "Content-Language", "X-Frame-Options", "Content-Security-Policy"} {
		if a, b := full.Header().Get(h), kept.Header().Get(h); a != b {
			t.Errorf("%s: full %q, kept %q", h, a, b)
		}
	}
	if !bytes.Equal(full.Body.Bytes(), kept.Body.Bytes()) {
		t.Errorf("bodies differ:\nfull: %s\nkept: %s", full.Body, kept.Body)
	}
	return kept
}

// TestSlottedCodePage: every variant of the code page, kept and filled
// with other values than the ones it was kept from, equals its full
// render; values a slot does not admit are rendered in full, escaped.
func TestSlottedCodePage(t *testing.T) {
	t.Parallel()
	c := testCodePages(t)
	n := 0
	for _, lang := range []string{"en", "de"} {
		for _, typ := range []string{"otp", "recovery"} {
			for _, otp := range []string{"", "1"} {
				for _, wa := range []string{"", "1"} {
					for _, formErr := range []string{"", translate(lang, "err.inactive")} {
						for _, codeErr := range []string{"", translate(lang, "err.code")} {
							first := codePage(lang, typ, otp, wa, formErr, codeErr, "req1", "csrf1", "state1", "alice", "App")
							sameAsFull(t, c, first)
							next := codePage(lang, typ, otp, wa, formErr, codeErr, "Req-2_x", "CSRF_2-y", strings.Repeat("S", 900), "bob@example.com (Bob Ärger)", "Other app")
							sameAsFull(t, c, next)
							n++
						}
					}
				}
			}
		}
	}
	if len(c.variants) != n {
		t.Errorf("kept %d variants, want one per key: %d", len(c.variants), n)
	}

	// Values no slot admits, and pages with more than the key covers:
	// rendered in full (so equal, and escaped by html/template).
	for _, pg := range []*page{
		codePage("en", "otp", "1", "", "", "", "req1", "csrf1", "state1", `<script>alert("x")</script> & 'y' + z`, "App"),
		codePage("en", "otp", "1", "", "", "", `req"1`, "csrf1", "state1", "alice", "App"),
		codePage("en", "otp", "1", "", "", "", "req1", "csrf 1", "state1", "alice", "App"),
		codePage("en", "otp", "1", "", "", "", "req1", "csrf1", "st&ate", "alice", "App"),
		codePage("en", "otp", "1", "", "", "", "req1", "csrf1", "", "alice", "App"),
		codePage("en", "otp", "1", "", "", "", "req1", "csrf1", "state1", "al\x00ice", "App"),
		codePage("en", "otp", "1", "", "", "", "req1", "csrf1", "state1", "al\xffice", "App"),
	} {
		kept := sameAsFull(t, c, pg)
		if strings.Contains(kept.Body.String(), "<script>") {
			t.Errorf("login name not escaped: %s", kept.Body)
		}
	}
	extra := codePage("en", "otp", "1", "", "", "", "req1", "csrf1", "state1", "alice", "App")
	extra.Form["message"] = "more"
	extra.Errors["other"] = "x"
	extra.Links = []link{{URL: "/x", Key: "mfa.useOTP"}}
	sameAsFull(t, c, extra)
	if len(c.variants) != n {
		t.Errorf("kept %d variants after pages rendered in full, want %d", len(c.variants), n)
	}
}

// TestSlottedCodePageFields: every field of page is a slot, part of the
// key, or one whose value sends the page to a full render (codeVariant);
// a new field must be placed there before the code page may show it.
func TestSlottedCodePageFields(t *testing.T) {
	t.Parallel()
	placed := map[string]bool{
		"RequestID": true, "CSRF": true, "LoginName": true, // slots (and Form's state)
		"Lang": true, "Title": true, "Error": true, "Errors": true, "Form": true, // the key
		"AppName": true, // not shown by the code page; TestSlottedCodePage varies it
		"Policy":  true, "Sessions": true, "AllowRegister": true, "IdPs": true, "Taken": true, "External": true, "WebAuthn": true,
		"Nonce": true, "Links": true, "Account": true, "Wide": true, "QR": true, "OTPURI": true, "Secret": true, "Code": true,
		"Detail": true, "Hint": true, "UserCode": true, // a full render when set
	}
	pt := reflect.TypeFor[page]()
	for i := range pt.NumField() {
		if f := pt.Field(i); !placed[f.Name] {
			t.Errorf("page.%s is new: make it a slot or part of codeKey, or render in full when it is set (codeVariant)", f.Name)
		}
	}
	if split([]byte("x ghslotz y"), "ghslot") != nil || split([]byte("x ghslot"), "ghslot") != nil {
		t.Error("split of a sentinel followed by no slot's letter: want nil")
	}
}

// TestSlottedCodePageBounded: past maxVariants keys, pages are rendered
// in full and nothing more is kept.
func TestSlottedCodePageBounded(t *testing.T) {
	t.Parallel()
	c := testCodePages(t)
	for i := range maxVariants + 10 {
		pg := codePage("en", "otp", "1", "", fmt.Sprintf("error %d", i), "", "req1", "csrf1", "state1", "alice", "App")
		sameAsFull(t, c, pg)
	}
	if len(c.variants) != maxVariants {
		t.Errorf("kept %d variants, want %d", len(c.variants), maxVariants)
	}
}

// FuzzSlottedCodePage: whatever the values, a kept variant filled with
// them equals the full render.
func FuzzSlottedCodePage(f *testing.F) {
	f.Add("req1", "csrf1", "state1", "alice", "App", uint8(0))
	f.Add("r", "c", "s", "bob@example.com", "", uint8(0xff))
	f.Add("r-_", "c_-", "s-_", "Ärger <b>", "x", uint8(3))
	c := testCodePages(f)
	f.Fuzz(func(t *testing.T, requestID, csrf, state, loginName, appName string, flags uint8) {
		lang := []string{"en", "de"}[flags&1]
		typ := []string{"otp", "recovery"}[flags>>1&1]
		otp := []string{"", "1"}[flags>>2&1]
		wa := []string{"", "1"}[flags>>3&1]
		codeErr := []string{"", translate(lang, "err.code")}[flags>>4&1]
		sameAsFull(t, c, codePage(lang, typ, otp, wa, "", codeErr, requestID, csrf, state, loginName, appName))
	})
}

// BenchmarkABSlottedCodePage is make bench-ab's pair for the kept code
// page (slotted.go): ab=hand fills a kept variant, ab=plain renders the
// template in full.
func BenchmarkABSlottedCodePage(b *testing.B) {
	c := testCodePages(b)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	state := strings.Repeat("S", 1100) // a sealed state's length
	for _, arm := range []string{"hand", "plain"} {
		b.Run("ab="+arm, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pg := codePage("en", "otp", "1", "", "", "", "0123456789abcdef0123", "csrf-token-0123456789abcdef", state, "bench-user", "App")
				w := httptest.NewRecorder()
				if arm == "hand" {
					c.render(w, log, http.StatusOK, pg)
				} else {
					c.tmpl.render(w, log, http.StatusOK, "mfa", pg)
				}
			}
		})
	}
}
