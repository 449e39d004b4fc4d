package internalapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Reserved scopes that add claims.
const (
	ScopeMetadata      = "urn:gatehouse:iam:user:metadata"
	ScopeResourceOwner = "urn:gatehouse:iam:user:resourceowner"
)

// Claims returns the OIDC claims of u for scopes: profile (name,
// given_name, family_name, nickname, preferred_username, locale, gender,
// updated_at), email (email, email_verified), phone (phone_number,
// phone_number_verified); address adds nothing, since no address is stored;
// the metadata scope adds every metadata value base64-encoded; the
// resource-owner scope adds the organization's id, name and primary domain.
func (s *Server) Claims(ctx context.Context, u *users.User, scopes []string) (map[string]any, error) {
	c := map[string]any{"sub": u.ID}
	has := func(s string) bool { return slices.Contains(scopes, s) }
	if has("profile") {
		c["name"] = u.DisplayName
		c["preferred_username"] = u.LoginName()
		c["updated_at"] = u.ChangeDate.Unix()
		if u.Type == users.TypeHuman {
			c["given_name"] = u.FirstName
			c["family_name"] = u.LastName
			if u.NickName != "" {
				c["nickname"] = u.NickName
			}
			if u.PreferredLanguage != "" {
				c["locale"] = u.PreferredLanguage
			}
			switch u.Gender {
			case 1:
				c["gender"] = "female"
			case 2:
				c["gender"] = "male"
			case 3:
				c["gender"] = "diverse"
			}
		}
	}
	if has("email") && u.Email != "" {
		c["email"] = u.Email
		v, err := s.EmailVerified(ctx, u)
		if err != nil {
			return nil, err
		}
		c["email_verified"] = v
	}
	if has("phone") && u.Phone != "" {
		c["phone_number"] = u.Phone
		c["phone_number_verified"] = u.PhoneVerified
	}
	if has(ScopeMetadata) {
		var rows []struct {
			Key   string `db:"key"`
			Value []byte `db:"value"`
		}
		if err := s.ES.DB().Select(ctx, &rows, `SELECT key, value FROM user_metadata WHERE user_id = ? ORDER BY key`, u.ID); err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			md := map[string]any{}
			for _, r := range rows {
				md[r.Key] = base64.StdEncoding.EncodeToString(r.Value)
			}
			c[ScopeMetadata] = md
		}
	}
	if has(ScopeResourceOwner) {
		o, err := s.orgs.Get(ctx, u.OrgID)
		if err != nil {
			return nil, err
		}
		c[ScopeResourceOwner+":id"] = o.ID
		c[ScopeResourceOwner+":name"] = o.Name
		c[ScopeResourceOwner+":primary_domain"] = o.PrimaryDomain
	}
	return c, nil
}

// EmailVerified is the email_verified claim: the address is marked
// verified, and either its user proved control of it (a mailed code or
// link, an invitation, a provider an IAM owner trusts) or an IAM owner
// marked it, or it lies in a domain its organization verified. An
// organization admin can mark any address verified, so anything else
// would let one tenant present another's "verified" address to every app;
// such an address is reported unverified instead (SECURITY.md).
func (s *Server) EmailVerified(ctx context.Context, u *users.User) (bool, error) {
	if !u.EmailVerified {
		return false, nil
	}
	if u.EmailProven {
		return true, nil
	}
	ok, err := s.orgs.DomainVerified(ctx, u.OrgID, u.EmailDomain)
	if err != nil {
		return false, fmt.Errorf("internalapi: email_verified: %w", err)
	}
	return ok, nil
}

// GetClaims returns an active user's claims for the granted scopes; a user
// that is not active is FailedPrecondition, so its tokens stop working at
// introspection and userinfo even before their revocation arrives.
func (s *Server) GetClaims(ctx context.Context, req *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error) {
	u, err := s.users.Get(ctx, req.GetUserId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("user")
	}
	if err != nil {
		return nil, internalErr(err, "get user")
	}
	if u.State != users.StateActive {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("user not active"))
	}
	claims, err := s.Claims(ctx, u, req.GetScopes())
	if err != nil {
		return nil, internalErr(err, "claims")
	}
	st, err := structpb.NewStruct(claims)
	if err != nil {
		return nil, internalErr(err, "encode claims")
	}
	return &directoryv1.GetClaimsResponse{Claims: st, PreferredLoginName: u.LoginName(), OrgId: u.OrgID}, nil
}

// RegisterUser creates a human user by self-registration. The policy and
// the user name rules of the management API apply.
func (s *Server) RegisterUser(ctx context.Context, req *directoryv1.RegisterUserRequest) (*directoryv1.RegisterUserResponse, error) {
	m := req
	var f apierr.Fields
	users.CheckUserName(&f, m.GetUserName())
	f.Check(apierr.Length("first_name", m.GetFirstName(), 1, 200))
	f.Check(apierr.Length("last_name", m.GetLastName(), 1, 200))
	f.Check(apierr.Length("email", m.GetEmail(), 1, 200))
	if a, err := mail.ParseAddress(m.GetEmail()); m.GetEmail() != "" && (err != nil || a.Address != m.GetEmail()) {
		f.Add("email", "is not a valid e-mail address")
	}
	f.Check(apierr.Length("preferred_language", m.GetPreferredLanguage(), 0, 10))
	if err := f.Err("REGISTER-invalid"); err != nil {
		return nil, err
	}
	org, err := s.orgs.Get(ctx, m.GetOrgId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("organization")
	}
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	// Self-registration only where the organization's login policy allows
	// it (off by default); authn checks too, this is the rule's home.
	lp, err := s.orgs.LoginPolicy(ctx, org.ID)
	if err != nil {
		return nil, internalErr(err, "get login policy")
	}
	if !lp.AllowRegister || !lp.AllowUsernamePassword {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the organization does not allow self-registration"))
	}
	hash, err := s.userCmds.NewPasswordHash(ctx, "", m.GetPassword(), org.PasswordPolicy)
	if err != nil {
		return nil, asInvalid(err)
	}
	p := users.HumanAdded{
		UserName: m.GetUserName(), FirstName: m.GetFirstName(), LastName: m.GetLastName(),
		DisplayName: strings.TrimSpace(m.GetFirstName() + " " + m.GetLastName()), PreferredLanguage: m.GetPreferredLanguage(),
		Email: m.GetEmail(), PasswordHash: hash,
	}
	// The address gets its verification code with the user (once a
	// minute per address: a registration names any address it likes).
	var cm *users.CodeMail
	var h users.Hasher
	if s.Mail.Outbox != nil {
		keys, err := s.factorKeys()
		if err != nil {
			return nil, err
		}
		h = keys.Hasher
		cm = &users.CodeMail{Sealer: s.Mail.Outbox.Sealer, Issuer: s.Mail.Issuer, Data: users.NewUserMailData(p, org.Name, org.PrimaryDomain)}
	}
	id, _, err := s.userCmds.AddHumanMailed(ctx, "self-registration", org, p, h, cm, s.Now(), true)
	if err != nil {
		return nil, asInternal(err, "register")
	}
	u, err := s.users.Get(ctx, id)
	if err != nil {
		return nil, internalErr(err, "read registered user")
	}
	return &directoryv1.RegisterUserResponse{User: userProto(u)}, nil
}
