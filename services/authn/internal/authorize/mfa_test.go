package authorize

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
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

func TestLapsed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	hour := durationpb.New(time.Hour)
	lp := &directoryv1.LoginPolicy{PasswordCheckLifetime: hour, SecondFactorCheckLifetime: hour,
		MultiFactorCheckLifetime: hour, ExternalLoginCheckLifetime: hour}
	fresh, old := now.Add(-time.Minute), now.Add(-2*time.Hour)
	for _, tc := range []struct {
		name   string
		lp     *directoryv1.LoginPolicy
		amr    []string
		checks session.Checks
		auth   time.Time
		want   Lapse
	}{
		{"fresh password", lp, []string{"pwd"}, session.Checks{Password: fresh}, fresh, NoLapse},
		{"old password", lp, []string{"pwd"}, session.Checks{Password: old}, fresh, LapseLogin},
		{"no lifetime never lapses", &directoryv1.LoginPolicy{}, []string{"pwd", "otp", "mfa"}, session.Checks{Password: old, SecondFactor: old}, old, NoLapse},
		{"old second factor, fresh password", lp, []string{"pwd", "otp", "mfa"}, session.Checks{Password: fresh, SecondFactor: old}, fresh, LapseSecondFactor},
		{"old security key", lp, []string{"pwd", "hwk", "mfa"}, session.Checks{Password: fresh, SecondFactor: old}, fresh, LapseSecondFactor},
		{"old password and second factor: sign in", lp, []string{"pwd", "otp", "mfa"}, session.Checks{Password: old, SecondFactor: old}, old, LapseLogin},
		{"old passkey", lp, []string{"swk", "user", "mfa"}, session.Checks{MultiFactor: old}, old, LapseLogin},
		{"fresh passkey", lp, []string{"swk", "user", "mfa"}, session.Checks{MultiFactor: fresh}, fresh, NoLapse},
		{"old external sign-in", lp, []string{"fed"}, session.Checks{External: old}, old, LapseLogin},
		{"a trusted provider's mfa is its own", lp, []string{"fed", "mfa"}, session.Checks{External: fresh}, old, NoLapse},
		{"unrecorded checks: auth_time", lp, []string{"pwd"}, session.Checks{}, old, LapseLogin},
	} {
		s := session.Session{AMR: tc.amr, Checks: tc.checks, AuthTime: tc.auth}
		if got := Lapsed(tc.lp, s, now); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
