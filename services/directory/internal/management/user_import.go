package management

import (
	"context"
	"errors"
	"fmt"
	"strings"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// ImportHumanUser creates a human user taken over from another system, with
// a clear-text password (checked against the organization's policy and
// hashed with argon2id) or an existing bcrypt or argon2id hash (stored as
// is; bcrypt is upgraded at the first login). Unlike AddHumanUser the user
// must change the password only when password_change_required is set.
func (s *Server) ImportHumanUser(ctx context.Context, req *managementv1.ImportHumanUserRequest) (*managementv1.ImportHumanUserResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
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
	// ("+", 1-50 characters: the proto's maximum) rather than AddHumanUser's.
	p := humanProfile(&f, lim, m.GetUserName(), profile, m.GetEmail().GetEmail(), "",
		m.GetEmail().GetIsEmailVerified(), m.GetPhone().GetIsPhoneVerified())
	p.Phone = m.GetPhone().GetPhone()
	if p.Phone != "" {
		f.Check(lim.Length("phone.phone", "phone.phone", p.Phone, 1))
		if !strings.HasPrefix(p.Phone, "+") {
			f.Add("phone.phone", `must start with "+" (international format)`)
		}
	} else {
		p.PhoneVerified = false
	}
	hash := importedHash(&f, lim, m)
	lim.ReportedIn(f, "user_name") // users.CheckUserName words it; registration and external identities use it too
	lim.Rest(&f)
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
	id, evs, err := s.addHuman(ctx, org, p)
	if err != nil {
		return nil, err
	}
	return &managementv1.ImportHumanUserResponse{UserId: id, Details: writeDetails(evs)}, nil
}

// importedHash validates hashed_password and returns the hash to store, or
// "" when none is given. At most one of password and hashed_password may be
// set. lim holds the value's maximum length (500), a rule of the proto.
func importedHash(f *apierr.Fields, lim *apierr.Limits, m *managementv1.ImportHumanUserRequest) string {
	hp := m.GetHashedPassword()
	if hp.GetValue() == "" && hp.GetAlgorithm() == "" {
		return ""
	}
	v := hp.GetValue()
	// Asked (so taken from lim) before the password check: beside a
	// password the value is not looked at, nor its length reported.
	lengthErr := lim.Length("hashed_password.value", "hashed_password.value", v, 1)
	if m.GetPassword() != "" {
		f.Add("hashed_password", "must not be set together with password")
		return ""
	}
	if lengthErr != nil {
		f.Check(lengthErr)
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
