package login

import (
	"context"
	"net/http"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
)

// changePage asks a user whose password must be changed for a new one.
// It is reached only after VerifyPassword named the user (UserID set);
// the change itself re-checks the current password.
func (p *Pages) changePage(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r)
	if f == nil {
		return
	}
	if f.ar.UserID == "" {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	pg := f.page("change.title")
	if err := p.addPolicy(r.Context(), f, pg); err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.tmpl.render(w, p.Logger, http.StatusOK, "change", pg)
}

func (p *Pages) changeSubmit(w http.ResponseWriter, r *http.Request) {
	f := p.load(w, r, "currentPassword", "newPassword", "confirmPassword")
	if f == nil {
		return
	}
	if f.ar.UserID == "" {
		redirect(w, r, authorize.PathLogin, f.ar.ID)
		return
	}
	ctx := r.Context()
	pg := f.page("change.title")
	org, err := p.org(ctx, f.req.OrgID)
	if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	pg.Policy = policyLines(f.lang, org.GetPasswordPolicy())
	show := func(status int) { p.tmpl.render(w, p.Logger, status, "change", pg) }
	if f.form["currentPassword"] == "" {
		pg.Errors["currentPassword"] = translate(f.lang, "err.required")
	}
	newPassword := f.form["newPassword"]
	if key := checkNewPassword(newPassword, f.form["confirmPassword"], org.GetPasswordPolicy()); key != "" {
		field := "newPassword"
		if key == "err.mismatch" {
			field = "confirmPassword"
		}
		pg.Errors[field] = translate(f.lang, key)
	}
	if len(pg.Errors) > 0 {
		show(http.StatusBadRequest)
		return
	}
	_, err = p.Directory.ChangePassword(ctx, &directoryv1.ChangePasswordRequest{
		UserId: f.ar.UserID, CurrentPassword: f.form["currentPassword"], NewPassword: newPassword, ClientAddress: clientAddress(r),
	})
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		pg.Errors["currentPassword"] = translate(f.lang, "err.credentials")
		show(http.StatusUnauthorized)
		return
	case connect.CodeInvalidArgument:
		pg.Errors["newPassword"] = translate(f.lang, "err.policy")
		show(http.StatusBadRequest)
		return
	}
	if key, status, ok := passwordError(err); ok {
		pg.Error = translate(f.lang, key)
		show(status)
		return
	} else if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	// The new password proves the user again and returns the current state.
	resp, err := p.Directory.VerifyPassword(ctx, &directoryv1.VerifyPasswordRequest{
		OrgId: f.req.OrgID, UserId: f.ar.UserID, Password: newPassword, ClientAddress: clientAddress(r),
	})
	if key, status, ok := passwordError(err); ok {
		pg.Error = translate(f.lang, key)
		show(status)
		return
	} else if err != nil {
		p.internal(w, r, f.lang, err)
		return
	}
	p.afterFirstFactor(w, r, f, resp.GetUser(), []string{oauth.AMRPassword}, resp.GetLoginPolicy(), resp.GetSecondFactors(), true)
}

func (p *Pages) org(ctx context.Context, orgID string) (*directoryv1.GetOrgResponse, error) {
	resp, err := p.Directory.GetOrg(ctx, &directoryv1.GetOrgRequest{OrgId: orgID})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (p *Pages) addPolicy(ctx context.Context, f *flow, pg *page) error {
	org, err := p.org(ctx, f.req.OrgID)
	if err != nil {
		return err
	}
	pg.Policy = policyLines(f.lang, org.GetPasswordPolicy())
	return nil
}

// checkNewPassword checks a new password on the page (the directory checks
// again): 1-72 characters, the confirmation, the org's policy. It returns
// a message key, or "".
func checkNewPassword(pw, confirm string, policy *directoryv1.PasswordPolicy) string {
	n := utf8.RuneCountInString(pw)
	switch {
	case pw == "":
		return "err.required"
	case n > 72:
		return "err.passwordLen"
	case pw != confirm:
		return "err.mismatch"
	case !meetsPolicy(pw, policy):
		return "err.policy"
	}
	return ""
}

func meetsPolicy(pw string, p *directoryv1.PasswordPolicy) bool {
	if p == nil {
		return true
	}
	var upper, lower, digit, symbol bool
	for _, c := range pw {
		switch {
		case unicode.IsUpper(c):
			upper = true
		case unicode.IsLower(c):
			lower = true
		case unicode.IsDigit(c):
			digit = true
		default:
			symbol = true
		}
	}
	return uint32(utf8.RuneCountInString(pw)) >= p.GetMinLength() &&
		(!p.GetHasUppercase() || upper) && (!p.GetHasLowercase() || lower) &&
		(!p.GetHasNumber() || digit) && (!p.GetHasSymbol() || symbol)
}
