package authorize

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

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

// stepUp says why s may not answer req before a second factor: the
// organization forces one (and does not exempt s's federated sign-in) or
// req asks for a class s did not reach (acr_values), and s never passed
// one. A session signed in before the policy changed, or before the
// user's factor, is the case this catches. "" when s may answer.
func (f *Flow) stepUp(ctx context.Context, req *Request, s session.Session) (string, error) {
	if req.ACR != "" && !oauth.ACRSatisfies(oauth.ACR(s.AMR), req.ACR) {
		// Checked first: a session with two factors may still lack the
		// phishing-resistant one a request asks for.
		return oauth.UnmetAuthenticationRequirements, nil
	}
	if slices.Contains(s.AMR, oauth.AMRMFA) {
		return "", nil
	}
	org, err := f.Directory.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: s.OrgID})
	if err != nil {
		return "", dependencyError("directory", err)
	}
	lp := org.GetLoginPolicy()
	if lp.GetForceMfa() && SecondFactorOwed(lp, nil, s.AMR, "") != NoSecondFactor {
		return oauth.InteractionRequired, nil
	}
	return "", nil
}

// askSecondFactor parks req with s's first factor and sends the browser to
// the second-factor page.
func (f *Flow) askSecondFactor(w http.ResponseWriter, r *http.Request, req *Request, s session.Session) {
	pending, err := f.parkWith(r.Context(), req, s.UserAgentID, s.LoginName, s.UserID, FirstFactor{UserID: s.UserID, AMR: s.AMR}.Encode())
	if err != nil {
		f.Fail(w, r, req.UILocales, req.FailWith(err))
		return
	}
	http.Redirect(w, r, PageURL(PathMFA, pending.ID), http.StatusFound)
}
