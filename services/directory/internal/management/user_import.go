package management

import (
	"context"
	"errors"
	"fmt"
	"strings"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
)

// maxImportedHashLength bounds hashed_password.value.
const maxImportedHashLength = 500

// ImportHumanUser creates a human user taken over from another system, with
// a clear-text password (checked against the organization's policy and
// hashed with argon2id) or an existing bcrypt or argon2id hash (stored as
// is; bcrypt is upgraded at the first login). Unlike AddHumanUser the user
// must change the password only when password_change_required is set.
func (s *Server) ImportHumanUser(ctx context.Context, req *managementv1.ImportHumanUserRequest) (*managementv1.ImportHumanUserResponse, error) {
	m := req
	var f apierr.Fields
	pr := m.GetProfile()
	var profile *managementv1.AddHumanUserRequest_Profile
	if pr != nil {
		profile = &managementv1.AddHumanUserRequest_Profile{
			FirstName: pr.GetFirstName(), LastName: pr.GetLastName(), NickName: pr.GetNickName(),
			DisplayName: pr.GetDisplayName(), PreferredLanguage: pr.GetPreferredLanguage(), Gender: pr.GetGender(),
		}
	}
	// The phone is checked here against the import's documented rule
	// ("+", 1-50 characters) rather than humanProfile's.
	p := humanProfile(&f, m.GetUserName(), profile, m.GetEmail().GetEmail(), "",
		m.GetEmail().GetIsEmailVerified(), m.GetPhone().GetIsPhoneVerified())
	p.Phone = m.GetPhone().GetPhone()
	if p.Phone != "" {
		f.Check(apierr.Length("phone.phone", p.Phone, 1, 50))
		if !strings.HasPrefix(p.Phone, "+") {
			f.Add("phone.phone", `must start with "+" (international format)`)
		}
	} else {
		p.PhoneVerified = false
	}
	hash := importedHash(&f, m)
	if err := f.Err("USER-invalid"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	if m.GetPassword() != "" {
		if hash, err = s.UserCmds.NewPasswordHash(ctx, "", m.GetPassword(), org.PasswordPolicy); err != nil {
			return nil, err
		}
	}
	p.PasswordHash, p.PasswordChangeRequired = hash, m.GetPasswordChangeRequired()
	id, evs, err := s.UserCmds.AddHuman(ctx, authz.FromContext(ctx).UserID, org, p)
	if err != nil {
		return nil, err
	}
	return &managementv1.ImportHumanUserResponse{UserId: id, Details: writeDetails(evs)}, nil
}

// importedHash validates hashed_password and returns the hash to store, or
// "" when none is given. At most one of password and hashed_password may be
// set.
func importedHash(f *apierr.Fields, m *managementv1.ImportHumanUserRequest) string {
	hp := m.GetHashedPassword()
	if hp.GetValue() == "" && hp.GetAlgorithm() == "" {
		return ""
	}
	if m.GetPassword() != "" {
		f.Add("hashed_password", "must not be set together with password")
		return ""
	}
	v := hp.GetValue()
	if err := apierr.Length("hashed_password.value", v, 1, maxImportedHashLength); err != nil {
		f.Check(err)
		return ""
	}
	kind := ""
	switch {
	case strings.HasPrefix(v, "$argon2id$"):
		kind = "argon2id"
	case strings.HasPrefix(v, "$2a$"), strings.HasPrefix(v, "$2b$"), strings.HasPrefix(v, "$2y$"):
		kind = "bcrypt"
	}
	switch alg := strings.ToLower(hp.GetAlgorithm()); {
	case alg != "" && alg != "bcrypt" && alg != "argon2id":
		f.Add("hashed_password.algorithm", `must be "bcrypt" or "argon2id"`)
		return ""
	case alg != "" && kind != "" && alg != kind:
		f.Add("hashed_password.algorithm", "does not match the encoding of the value ("+kind+")")
		return ""
	}
	if err := secrets.CheckPasswordHash(v); errors.Is(err, secrets.ErrHashCost) {
		// The parameters would set the cost of every login attempt.
		f.Add("hashed_password.value", "has parameters beyond the import bounds ("+strings.TrimPrefix(err.Error(), secrets.ErrHashCost.Error()+": ")+
			fmt.Sprintf("); allowed: argon2id m ≤ %d KiB, t ≤ %d, p ≤ %d; bcrypt cost %d-%d", secrets.MaxImportArgonMemoryKiB,
				secrets.MaxImportArgonTime, secrets.MaxImportArgonThreads, secrets.MinImportBcryptCost, secrets.MaxImportBcryptCost))
		return ""
	} else if err != nil {
		f.Add("hashed_password.value", "is not a valid bcrypt or argon2id hash")
		return ""
	}
	return v
}
