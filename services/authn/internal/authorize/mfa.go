package authorize

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Second-factor page paths (served by package login).
const (
	// PathMFA asks a user who passed the first factor for a second one.
	PathMFA = "/ui/login/mfa"
	// PathMFAInit enrolls a second factor where the login policy forces
	// one and the user has none.
	PathMFAInit = "/ui/login/mfa/init"
)

// amrFederated is federation.AMRFederated (a sign-in through an external
// identity provider); this package must not depend on federation.
const amrFederated = "fed"

// FirstFactor is what a pending request's user has passed while a second
// factor is owed (session.AuthRequest.FirstFactor): who, and by which
// methods. Only the login pages write it, after checking the factor, or
// the authorization endpoint from a live session of that user.
type FirstFactor struct {
	UserID string   `json:"userId"`
	AMR    []string `json:"amr"`
	// Passed: the second factor is passed too (a recovery code was
	// accepted, or a factor enrolled); the page shows what the user must
	// see once (the codes left, the new codes) before it continues.
	Passed            bool `json:"passed,omitempty"`
	RecoveryCodesLeft int  `json:"recoveryCodesLeft,omitempty"`
	// Enrolled: Passed by enrolling a factor (not by a recovery code).
	Enrolled bool `json:"enrolled,omitempty"`
	// HasFactor: the user had a ready second factor when the first one
	// was checked (the code page then needs no lookup). A factor removed
	// since only makes the code page refuse every code.
	HasFactor bool `json:"hasFactor,omitempty"`
	// Factors are the user's ready second factors then ("otp", "u2f",
	// "passwordless"), so the page offers the right ones first.
	Factors []string `json:"factors,omitempty"`
	// Carried: the first factor comes from a session (a step-up, a second
	// factor past its check lifetime), not checked in this login.
	Carried bool `json:"carried,omitempty"`
}

// ParseFirstFactor reads a pending request's FirstFactor; ok is false when
// none was recorded.
func ParseFirstFactor(ar session.AuthRequest) (FirstFactor, bool) {
	var ff FirstFactor
	if ar.FirstFactor == "" || json.Unmarshal([]byte(ar.FirstFactor), &ff) != nil || ff.UserID == "" {
		return FirstFactor{}, false
	}
	return ff, true
}

// Encode is the stored form of ff.
func (ff FirstFactor) Encode() string {
	b, _ := json.Marshal(ff) // strings only: cannot fail
	return string(b)
}

// SecondFactor is what the login owes after the first factor (amr): Ask
// for one of the user's factors, Enroll one where the policy forces it,
// or nothing.
type SecondFactor int

// Second-factor decisions.
const (
	NoSecondFactor SecondFactor = iota
	AskSecondFactor
	EnrollSecondFactor
)

// SecondFactorOwed decides what a sign-in by amr owes, given the user's
// ready second factors, the organization's login policy and the class the
// request asks for (Request.ACR): a user with a factor is asked for it;
// one without enrolls one where force_mfa holds or the request asks for
// more than one factor. force_mfa_local_only exempts federated sign-ins
// from the policy (not from the request's acr), and an amr with "mfa" (a
// trusted provider's) owes nothing.
func SecondFactorOwed(lp *directoryv1.LoginPolicy, factors []string, amr []string, acr string) SecondFactor {
	if slices.Contains(amr, oauth.AMRMFA) {
		return NoSecondFactor
	}
	exempt := slices.Contains(amr, amrFederated) && lp.GetForceMfaLocalOnly()
	wants := acr != "" && !oauth.ACRSatisfies(oauth.ACR(amr), acr)
	switch {
	case (wants || lp.GetForceMfa() && !exempt) && len(factors) == 0:
		return EnrollSecondFactor
	case wants || len(factors) > 0 && !exempt:
		return AskSecondFactor
	}
	return NoSecondFactor
}

// Lapse is a check of a session past the login policy's lifetime for it
// (passwordCheckLifetime and the others): the step to run again.
type Lapse int

// Lapses.
const (
	NoLapse Lapse = iota
	// LapseLogin: the first factor (a password, an external provider, a
	// passkey) is too old: the user signs in again.
	LapseLogin
	// LapseSecondFactor: the second factor is too old: it is asked again.
	LapseSecondFactor
)

// secondFactorMethods are the amr values of a second factor.
var secondFactorMethods = []string{oauth.AMROTP, oauth.AMRHardware, oauth.AMRSoftware, oauth.AMRUser, oauth.AMRMFA}

// Lapsed says which check of s the login policy lp wants run again at
// now. A zero or unset lifetime never lapses.
func Lapsed(lp *directoryv1.LoginPolicy, s session.Session, now time.Time) Lapse {
	has := func(m string) bool { return slices.Contains(s.AMR, m) }
	over := func(d interface{ AsDuration() time.Duration }, at time.Time) bool {
		life := d.AsDuration()
		return life > 0 && now.Sub(s.Checked(at)) > life
	}
	pwd, fed := has(oauth.AMRPassword), has(amrFederated)
	switch {
	case pwd && over(lp.GetPasswordCheckLifetime(), s.Checks.Password),
		fed && over(lp.GetExternalLoginCheckLifetime(), s.Checks.External),
		!pwd && !fed && has(oauth.AMRSoftware) && has(oauth.AMRUser) && over(lp.GetMultiFactorCheckLifetime(), s.Checks.MultiFactor):
		return LapseLogin
	case (pwd || fed) && (has(oauth.AMROTP) || has(oauth.AMRHardware) || has(oauth.AMRSoftware)) &&
		over(lp.GetSecondFactorCheckLifetime(), s.Checks.SecondFactor):
		return LapseSecondFactor
	}
	return NoLapse
}

// stepUp says why s may not answer req as it is: a check past its
// lifetime (lapse), or, as an OAuth error code, that req asks for a
// class s did not reach (acr_values) or the organization forces a second
// factor s never passed (a session signed in before the policy changed,
// or before the user's factor). "" and NoLapse when s may answer.
func (f *Flow) stepUp(ctx context.Context, req *Request, s session.Session) (string, Lapse, error) {
	org, err := f.Directory.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: s.OrgID})
	if err != nil {
		return "", NoLapse, dependencyError("directory", err)
	}
	lp := org.GetLoginPolicy()
	if l := Lapsed(lp, s, f.Now()); l != NoLapse {
		return "", l, nil
	}
	if req.ACR != "" && !oauth.ACRSatisfies(oauth.ACR(s.AMR), req.ACR) {
		// Checked before "mfa": a session with two factors may still lack
		// the phishing-resistant one a request asks for.
		return oauth.UnmetAuthenticationRequirements, NoLapse, nil
	}
	if slices.Contains(s.AMR, oauth.AMRMFA) {
		return "", NoLapse, nil
	}
	if lp.GetForceMfa() && SecondFactorOwed(lp, nil, s.AMR, "") != NoSecondFactor {
		return oauth.InteractionRequired, NoLapse, nil
	}
	return "", NoLapse, nil
}

// withoutSecondFactor is amr without the second factor's values (whose
// check lapsed: the user passes it again).
func withoutSecondFactor(amr []string) []string {
	var out []string
	for _, m := range amr {
		if !slices.Contains(secondFactorMethods, m) {
			out = append(out, m)
		}
	}
	return out
}

// askSecondFactor parks req with s's first factor and sends the browser to
// the second-factor page.
func (f *Flow) askSecondFactor(w http.ResponseWriter, r *http.Request, req *Request, s session.Session, amr []string) {
	pending, err := f.parkWith(r.Context(), req, s.UserAgentID, s.LoginName, s.UserID, FirstFactor{UserID: s.UserID, AMR: amr, Carried: true}.Encode())
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	http.Redirect(w, r, PageURL(PathMFA, pending.ID), http.StatusFound)
}
