package management

import (
	"context"
	"errors"
	"net/mail"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// user loads a user of the target organization; users of other
// organizations are NotFound. id is the request's field at path ("id" or
// "user_id"), whose maximum length (200) is a string.max_len rule in the
// proto: lim reports it, always as "id", and after it any limit of the
// request no check reported before (most user RPCs check nothing else),
// as USER-invalid-id.
func (s *Server) user(ctx context.Context, lim *apierr.Limits, path, id string) (*users.User, error) {
	var f apierr.Fields
	f.Check(lim.Length("id", path, id, 1))
	lim.Rest(&f)
	if err := f.Err("USER-invalid-id"); err != nil {
		return nil, err
	}
	u, err := s.Users.GetInOrg(ctx, authz.FromContext(ctx).OrgID, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("USER-not-found", "user not found")
	}
	return u, err
}

// checkUserName applies the user name rules (users.CheckUserName).
func checkUserName(f *apierr.Fields, name string) { users.CheckUserName(f, name) }

// checkEmail validates an optional (required=false) or required address,
// the request's field at path field; lim reports its maximum length (200).
func checkEmail(f *apierr.Fields, lim *apierr.Limits, field, addr string, required bool) {
	if addr == "" {
		if required {
			f.Add(field, "is required")
		}
		return
	}
	f.Check(lim.Length(field, field, addr, 1))
	if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr {
		f.Add(field, "is not a valid e-mail address")
	}
}

// userToProto renders a user with its login names.
func userToProto(u *users.User) *managementv1.User {
	out := &managementv1.User{
		Id:                 u.ID,
		Details:            readDetails(u.CreationDate, u.ChangeDate, u.Sequence, u.OrgID),
		State:              managementv1.UserState(u.State),
		UserName:           u.UserName,
		LoginNames:         []string{u.LoginName()},
		PreferredLoginName: u.LoginName(),
	}
	if u.Type == users.TypeMachine {
		out.Type = &managementv1.User_Machine{Machine: &managementv1.Machine{
			Name:            u.MachineName,
			Description:     u.MachineDescription,
			HasSecret:       len(u.SecretHash) > 0,
			AccessTokenType: managementv1.AccessTokenType(u.AccessTokenType),
		}}
		return out
	}
	out.Type = &managementv1.User_Human{Human: &managementv1.Human{
		Profile: &managementv1.Profile{
			FirstName:         u.FirstName,
			LastName:          u.LastName,
			NickName:          u.NickName,
			DisplayName:       u.DisplayName,
			PreferredLanguage: u.PreferredLanguage,
			Gender:            managementv1.Gender(u.Gender),
		},
		Email: &managementv1.Email{Email: u.Email, IsEmailVerified: u.EmailVerified},
		Phone: &managementv1.Phone{Phone: u.Phone, IsPhoneVerified: u.PhoneVerified},
	}}
	return out
}

// GetUserByID returns a user of the organization.
func (s *Server) GetUserByID(ctx context.Context, req *managementv1.GetUserByIDRequest) (*managementv1.GetUserByIDResponse, error) {
	lim, err := apierr.CheckLimits(req) // the id's maximum length is in the proto
	if err != nil {
		return nil, err
	}
	u, err := s.user(ctx, lim, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	return &managementv1.GetUserByIDResponse{User: userToProto(u)}, nil
}

// humanProfile validates the parts of a human user shared by AddHumanUser
// and ImportHumanUser (not the phone, whose rules differ) and returns the
// event payload without a password. lim is the request's: the maximum
// lengths of the profile's fields and of the e-mail address are in the
// proto, at the same paths in both requests.
func humanProfile(f *apierr.Fields, lim *apierr.Limits, userName string, p *managementv1.AddHumanUserRequest_Profile, email, phone string, emailVerified, phoneVerified bool) users.HumanAdded {
	checkUserName(f, userName)
	if p == nil {
		f.Add("profile", "is required")
		p = &managementv1.AddHumanUserRequest_Profile{}
	}
	f.Check(lim.Length("profile.first_name", "profile.first_name", p.GetFirstName(), 1))
	f.Check(lim.Length("profile.last_name", "profile.last_name", p.GetLastName(), 1))
	f.Check(lim.Length("profile.nick_name", "profile.nick_name", p.GetNickName(), 0))
	f.Check(lim.Length("profile.display_name", "profile.display_name", p.GetDisplayName(), 0))
	f.Check(lim.Length("profile.preferred_language", "profile.preferred_language", p.GetPreferredLanguage(), 0))
	checkEmail(f, lim, "email.email", email, true)
	display := p.GetDisplayName()
	if display == "" {
		display = strings.TrimSpace(p.GetFirstName() + " " + p.GetLastName())
	}
	return users.HumanAdded{
		UserName: userName, FirstName: p.GetFirstName(), LastName: p.GetLastName(), NickName: p.GetNickName(),
		DisplayName: display, PreferredLanguage: p.GetPreferredLanguage(), Gender: int32(p.GetGender()),
		Email: email, EmailVerified: emailVerified, Phone: phone, PhoneVerified: phoneVerified,
	}
}

// AddHumanUser creates a human user; an initial password must be changed at
// the first login.
func (s *Server) AddHumanUser(ctx context.Context, req *managementv1.AddHumanUserRequest) (*managementv1.AddHumanUserResponse, error) {
	m := req
	lim, err := apierr.CheckLimits(m) // the maximum lengths are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	p := humanProfile(&f, lim, m.GetUserName(), m.GetProfile(), m.GetEmail().GetEmail(), m.GetPhone().GetPhone(),
		m.GetEmail().GetIsEmailVerified(), m.GetPhone().GetIsPhoneVerified())
	f.Check(lim.Length("phone.phone", "phone.phone", m.GetPhone().GetPhone(), 0))
	lim.ReportedIn(f, "user_name") // users.CheckUserName words it; registration and external identities use it too
	lim.Rest(&f)
	if err := f.Err("USER-invalid"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	if m.GetInitialPassword() != "" {
		hash, err := s.UserCmds.NewPasswordHash(ctx, "", m.GetInitialPassword(), org.PasswordPolicy)
		if err != nil {
			return nil, err
		}
		p.PasswordHash, p.PasswordChangeRequired = hash, true
	}
	id, evs, err := s.addHuman(ctx, org, p)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddHumanUserResponse{UserId: id, Details: writeDetails(evs)}, nil
}

// SetHumanPassword sets a human user's password; unless noChangeRequired,
// the user must change it at the next login.
func (s *Server) SetHumanPassword(ctx context.Context, req *managementv1.SetHumanPasswordRequest) (*managementv1.SetHumanPasswordResponse, error) {
	u, err := s.humanUser(ctx, req)
	if err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	hash, err := s.UserCmds.NewPasswordHash(ctx, u.ID, req.GetPassword(), org.PasswordPolicy)
	if err != nil {
		return nil, err
	}
	evs, err := s.UserCmds.SetPassword(ctx, authz.FromContext(ctx).UserID, u, hash, !req.GetNoChangeRequired(), true)
	if err != nil {
		return nil, err
	}
	s.cutAccess(ctx)
	return &managementv1.SetHumanPasswordResponse{Details: writeDetails(evs)}, nil
}
