package login

import (
	"testing"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
)

func TestLanguage(t *testing.T) {
	rows := []struct {
		locales []string
		accept  string
		want    string
	}{
		{nil, "", "en"},
		{[]string{"de"}, "en", "de"},
		{[]string{"fr", "de-CH"}, "", "de"},
		{[]string{"fr"}, "de;q=0.2, en;q=0.9", "en"},
		{nil, "fr, de-AT;q=0.8", "de"},
		{nil, "de;q=0", "en"},
		{[]string{"DE_de"}, "", "de"},
	}
	for _, row := range rows {
		if got := Language(row.locales, row.accept); got != row.want {
			t.Errorf("Language(%q, %q) = %s; want %s", row.locales, row.accept, got, row.want)
		}
	}
}

func TestEveryMessageIsTranslated(t *testing.T) {
	for key := range messages["en"] {
		if _, ok := messages["de"][key]; !ok {
			t.Errorf("message %q has no German text", key)
		}
	}
	for key := range messages["de"] {
		if _, ok := messages["en"][key]; !ok {
			t.Errorf("German message %q has no English text", key)
		}
	}
}

func TestCheckNewPassword(t *testing.T) {
	p := &directoryv1.PasswordPolicy{MinLength: 8, HasUppercase: true, HasLowercase: true, HasNumber: true, HasSymbol: true}
	rows := []struct{ pw, confirm, want string }{
		{"", "", "err.required"},
		{"Aa1!aaaa", "Aa1!aaab", "err.mismatch"},
		{"Aa1!aaa", "Aa1!aaa", "err.policy"},
		{"aa1!aaaa", "aa1!aaaa", "err.policy"},
		{"AA1!AAAA", "AA1!AAAA", "err.policy"},
		{"Aa!aaaaa", "Aa!aaaaa", "err.policy"},
		{"Aa1aaaaa", "Aa1aaaaa", "err.policy"},
		{"Aa1!aaaa", "Aa1!aaaa", ""},
		{string(make([]byte, 73)), string(make([]byte, 73)), "err.passwordLen"},
	}
	for _, row := range rows {
		if got := checkNewPassword(row.pw, row.confirm, p); got != row.want {
			t.Errorf("checkNewPassword(%q) = %q; want %q", row.pw, got, row.want)
		}
	}
}
