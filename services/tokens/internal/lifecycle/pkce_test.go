package lifecycle

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// RFC 7636 Appendix B.
const (
	rfcVerifier  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
)

func TestPKCE(t *testing.T) {
	if got := S256(rfcVerifier); got != rfcChallenge {
		t.Fatalf("S256 = %q; want %q", got, rfcChallenge)
	}
	for v, want := range map[string]bool{
		rfcVerifier: true, strings.Repeat("a", 43): true, strings.Repeat("~._-", 32): true,
		strings.Repeat("a", 42): false, strings.Repeat("a", 129): false, strings.Repeat("a", 42) + "+": false,
		strings.Repeat("a", 42) + "é": false,
	} {
		if ValidVerifier(v) != want {
			t.Errorf("ValidVerifier(%q) = %v; want %v", v, !want, want)
		}
	}
	for c, want := range map[string]bool{
		rfcChallenge: true, rfcVerifier: true, rfcChallenge[:42]: false, rfcChallenge + "A": false,
		strings.Repeat("+", 43): false, "": false,
	} {
		if ValidChallenge(c) != want {
			t.Errorf("ValidChallenge(%q) = %v; want %v", c, !want, want)
		}
	}
	cases := []struct {
		challenge, verifier string
		want                *oauth.Error
	}{
		{"", "", nil},
		{rfcChallenge, rfcVerifier, nil},
		{"", rfcVerifier, oauth.ErrInvalidRequest},
		{rfcChallenge, "", oauth.ErrInvalidRequest},
		{rfcChallenge, strings.Repeat("a", 43), oauth.ErrInvalidGrant},
	}
	for _, tc := range cases {
		err := checkPKCE(tc.challenge, tc.verifier)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("checkPKCE(%q, %q) = %v; want %v", tc.challenge, tc.verifier, err, tc.want)
		}
	}
}
