package authorize

import (
	"testing"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

func TestSecondFactorOwed(t *testing.T) {
	t.Parallel()
	plain := &directoryv1.LoginPolicy{}
	forced := &directoryv1.LoginPolicy{ForceMfa: true}
	localOnly := &directoryv1.LoginPolicy{ForceMfa: true, ForceMfaLocalOnly: true}
	pwd, fed := []string{"pwd"}, []string{"fed"}
	otp := []string{"otp"}
	for _, tc := range []struct {
		name    string
		lp      *directoryv1.LoginPolicy
		factors []string
		amr     []string
		acr     string
		want    SecondFactor
	}{
		{"no policy, no factor", plain, nil, pwd, "", NoSecondFactor},
		{"a factor is always asked for", plain, otp, pwd, "", AskSecondFactor},
		{"forced without a factor enrolls", forced, nil, pwd, "", EnrollSecondFactor},
		{"forced with a factor asks", forced, otp, pwd, "", AskSecondFactor},
		{"federated sign-in is forced too", forced, nil, fed, "", EnrollSecondFactor},
		{"local only exempts federated", localOnly, nil, fed, "", NoSecondFactor},
		{"local only exempts federated with a factor", localOnly, otp, fed, "", NoSecondFactor},
		{"local only still forces passwords", localOnly, nil, pwd, "", EnrollSecondFactor},
		{"a trusted provider's mfa counts", forced, otp, []string{"fed", "mfa"}, "", NoSecondFactor},
		{"acr mfa asks", plain, otp, pwd, oauth.ACRMFA, AskSecondFactor},
		{"acr mfa enrolls", plain, nil, pwd, oauth.ACRMFA, EnrollSecondFactor},
		{"acr mfa is not exempt for federated", localOnly, otp, fed, oauth.ACRMFA, AskSecondFactor},
		{"acr password is met", plain, nil, pwd, oauth.ACRPassword, NoSecondFactor},
	} {
		if got := SecondFactorOwed(tc.lp, tc.factors, tc.amr, tc.acr); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
