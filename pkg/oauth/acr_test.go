package oauth_test

import (
	"testing"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

func TestACR(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amr  []string
		want string
	}{
		{nil, ""},
		{[]string{"swk"}, ""}, // a machine key: no person's login
		{[]string{"pwd"}, oauth.ACRPassword},
		{[]string{"fed"}, oauth.ACRPassword},
		{[]string{"pwd", "otp", "mfa"}, oauth.ACRMFA},
		{[]string{"fed", "mfa"}, oauth.ACRMFA},
		{[]string{"pwd", "hwk", "mfa"}, oauth.ACRPhishingResistant},
		{[]string{"swk", "user"}, oauth.ACRPhishingResistant},
	} {
		if got := oauth.ACR(tc.amr); got != tc.want {
			t.Errorf("ACR(%v) = %q, want %q", tc.amr, got, tc.want)
		}
	}
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{oauth.ACRMFA, oauth.ACRPassword, true},
		{oauth.ACRPassword, oauth.ACRMFA, false},
		{oauth.ACRPhishingResistant, oauth.ACRMFA, true},
		{oauth.ACRMFA, oauth.ACRPhishingResistant, false},
		{oauth.ACRPhishingResistant, "urn:other", false},
		{"", oauth.ACRPassword, false},
	} {
		if got := oauth.ACRSatisfies(tc.have, tc.want); got != tc.ok {
			t.Errorf("ACRSatisfies(%q, %q) = %v", tc.have, tc.want, got)
		}
	}
}
