package internalapi

import (
	"context"
	"errors"
	"net/mail"
	"strings"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// External identity providers and the users linked to them: authn reads an
// organization's IdPs for the login page and the federation flow, then
// finds, links or registers the user of the identity the IdP asserted.

func failedPrecondition(msg string) error {
	return connect.NewError(connect.CodeFailedPrecondition, errors.New(msg))
}

// maxIDLength bounds ids in requests (ids are generated, far shorter).
const maxIDLength = 200

// checkExternal validates an external identity of a request.
func checkExternal(f *apierr.Fields, idpID, subject string) {
	f.Check(apierr.Length("idp_id", idpID, 1, maxIDLength))
	f.Check(apierr.Length("external_subject", subject, 1, users.MaxExternalSubjectLength))
}

// checkIssuer refuses an identity verified against another issuer than
// p's: the provider was repointed while the sign-in was under way, and a
// subject of the old namespace must not name anyone under the new one.
// Like an inactive provider, it is FailedPrecondition (the sign-in ends).
func checkIssuer(p *idps.IDP, issuer string) error {
	if issuer != p.Issuer {
		return failedPrecondition("the identity provider's issuer has changed since the sign-in began")
	}
	return nil
}

// external names the identity subject at p, as p is now.
func external(p *idps.IDP, subject, userName string) users.External {
	return users.External{IdPID: p.ID, Issuer: p.Issuer, ClientID: p.ClientID, Subject: subject, UserName: userName}
}

func (s *Server) idpQueries() *idps.Queries { return &idps.Queries{DB: s.ES.DB()} }

// idpByID returns an IdP by id, whatever its organization: the federation
// callback knows the IdP, and the IdP names the organization.
func (s *Server) idpByID(ctx context.Context, id string) (*idps.IDP, error) {
	var orgs []string
	if err := s.ES.DB().Select(ctx, &orgs, `SELECT org_id FROM idps WHERE id = ?`, id); err != nil {
		return nil, internalErr(err, "find identity provider")
	}
	if len(orgs) == 0 {
		return nil, notFound("identity provider")
	}
	p, err := s.idpQueries().Get(ctx, orgs[0], id)
	if errors.Is(err, db.ErrNotFound) { // removed in between
		return nil, notFound("identity provider")
	}
	if err != nil {
		return nil, internalErr(err, "get identity provider")
	}
	return p, nil
}

// activeIdP is idpByID, FailedPrecondition for an inactive IdP.
func (s *Server) activeIdP(ctx context.Context, id string) (*idps.IDP, error) {
	p, err := s.idpByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if p.State != idps.StateActive {
		return nil, failedPrecondition("the identity provider is not active")
	}
	return p, nil
}

// idpProto renders an IdP without its secret.
func idpProto(p *idps.IDP) *directoryv1.IdP {
	return &directoryv1.IdP{
		Id:                 p.ID,
		OrgId:              p.OrgID,
		Name:               p.Name,
		StylingType:        directoryv1.StylingType(p.StylingType),
		Issuer:             p.Issuer,
		ClientId:           p.ClientID,
		Scopes:             p.RequestScopes(),
		DisplayNameMapping: directoryv1.MappingField(p.DisplayNameMapping),
		UsernameMapping:    directoryv1.MappingField(p.UsernameMapping),
		AutoRegister:       p.AutoRegister,
		TrustAmr:           p.TrustAMR,
		Active:             p.State == idps.StateActive,
	}
}

// GetIdP returns an IdP of an organization with its decrypted client secret.
func (s *Server) GetIdP(ctx context.Context, req *directoryv1.GetIdPRequest) (*directoryv1.GetIdPResponse, error) {
	m := req
	var f apierr.Fields
	f.Check(apierr.Length("org_id", m.GetOrgId(), 1, maxIDLength))
	f.Check(apierr.Length("idp_id", m.GetIdpId(), 1, maxIDLength))
	if err := f.Err("IDP-invalid"); err != nil {
		return nil, err
	}
	p, err := s.idpQueries().Get(ctx, m.GetOrgId(), m.GetIdpId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("identity provider")
	}
	if err != nil {
		return nil, internalErr(err, "get identity provider")
	}
	secret, err := idps.Secrets{Cipher: s.IdPSecrets}.ClientSecret(ctx, p)
	if err != nil {
		return nil, internalErr(err, "open client secret")
	}
	return &directoryv1.GetIdPResponse{Idp: idpProto(p), ClientSecret: secret}, nil
}

// ListIdPs returns the active IdPs of an organization, by name.
func (s *Server) ListIdPs(ctx context.Context, req *directoryv1.ListIdPsRequest) (*directoryv1.ListIdPsResponse, error) {
	orgID := req.GetOrgId()
	var f apierr.Fields
	f.Check(apierr.Length("org_id", orgID, 1, maxIDLength))
	if err := f.Err("IDP-invalid"); err != nil {
		return nil, err
	}
	if _, err := s.orgs.Get(ctx, orgID); errors.Is(err, db.ErrNotFound) {
		return nil, notFound("organization")
	} else if err != nil {
		return nil, internalErr(err, "get org")
	}
	all, _, err := s.idpQueries().Search(ctx, orgID, idps.Search{Asc: true})
	if err != nil {
		return nil, internalErr(err, "list identity providers")
	}
	out := &directoryv1.ListIdPsResponse{}
	for _, p := range all {
		if p.State == idps.StateActive {
			out.Idps = append(out.Idps, idpProto(p))
		}
	}
	return out, nil
}

// LinkExternalUser links a human user of the IdP's organization to an
// external identity.
func (s *Server) LinkExternalUser(ctx context.Context, req *directoryv1.LinkExternalUserRequest) (*directoryv1.LinkExternalUserResponse, error) {
	m := req
	var f apierr.Fields
	checkExternal(&f, m.GetIdpId(), m.GetExternalSubject())
	f.Check(apierr.Length("external_user_name", m.GetExternalUserName(), 0, 200))
	f.Check(apierr.Length("user_id", m.GetUserId(), 1, maxIDLength))
	if err := f.Err("LINK-invalid"); err != nil {
		return nil, err
	}
	p, err := s.idpByID(ctx, m.GetIdpId())
	if err != nil {
		return nil, err
	}
	u, err := s.users.Get(ctx, m.GetUserId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("user")
	}
	if err != nil {
		return nil, internalErr(err, "get user")
	}
	switch {
	case p.State != idps.StateActive:
		return nil, failedPrecondition("the identity provider is not active")
	case u.OrgID != p.OrgID:
		return nil, failedPrecondition("the user belongs to another organization than the identity provider")
	case u.Type != users.TypeHuman:
		return nil, failedPrecondition("only human users can be linked to an identity provider")
	}
	if err := checkIssuer(p, m.GetIssuer()); err != nil {
		return nil, err
	}
	// The user acts (through authn), as in ChangePassword.
	if _, err := s.userCmds.AddLink(ctx, u.ID, u, external(p, m.GetExternalSubject(), m.GetExternalUserName())); err != nil {
		return nil, asInternal(err, "link")
	}
	return &directoryv1.LinkExternalUserResponse{}, nil
}

// GetLinkedUser returns the user linked to an external identity of an
// active IdP.
func (s *Server) GetLinkedUser(ctx context.Context, req *directoryv1.GetLinkedUserRequest) (*directoryv1.GetLinkedUserResponse, error) {
	m := req
	var f apierr.Fields
	checkExternal(&f, m.GetIdpId(), m.GetExternalSubject())
	if err := f.Err("LINK-invalid"); err != nil {
		return nil, err
	}
	p, err := s.activeIdP(ctx, m.GetIdpId())
	if err != nil {
		return nil, err
	}
	if err := checkIssuer(p, m.GetIssuer()); err != nil {
		return nil, err
	}
	u, _, err := s.linked(ctx, p.ID, m.GetExternalSubject())
	if err != nil {
		return nil, err
	}
	return &directoryv1.GetLinkedUserResponse{User: userProto(u)}, nil
}

// ConfirmLinkedEmail verifies the linked user's address when the
// identity's provider asserted it verified at a sign-in.
func (s *Server) ConfirmLinkedEmail(ctx context.Context, req *directoryv1.ConfirmLinkedEmailRequest) (*directoryv1.ConfirmLinkedEmailResponse, error) {
	m := req
	var f apierr.Fields
	checkExternal(&f, m.GetIdpId(), m.GetExternalSubject())
	if err := f.Err("LINK-invalid"); err != nil {
		return nil, err
	}
	p, err := s.activeIdP(ctx, m.GetIdpId())
	if err != nil {
		return nil, err
	}
	if err := checkIssuer(p, m.GetIssuer()); err != nil {
		return nil, err
	}
	u, _, err := s.linked(ctx, p.ID, m.GetExternalSubject())
	if err != nil {
		return nil, err
	}
	proof := idpProof(p, true)
	switch {
	case u.Email == "" || !strings.EqualFold(u.Email, m.GetEmail()):
		return &directoryv1.ConfirmLinkedEmailResponse{Verified: u.EmailVerified}, nil
	case u.EmailVerified && (u.EmailProven || proof == users.ProofOrg):
		return &directoryv1.ConfirmLinkedEmailResponse{Verified: true}, nil
	}
	_, _, err = s.userCmds.ChangeEmail(ctx, "idp:"+p.ID, u, u.Email, proof, nil, nil, s.Now())
	if connect.CodeOf(err) == connect.CodeAlreadyExists || connect.CodeOf(err) == connect.CodeAborted {
		// Another user's verified address, or a change meanwhile: the
		// next sign-in asks again.
		return &directoryv1.ConfirmLinkedEmailResponse{Verified: u.EmailVerified}, nil
	}
	if err != nil {
		return nil, asInternal(err, "confirm linked e-mail")
	}
	return &directoryv1.ConfirmLinkedEmailResponse{Verified: true}, nil
}

// linked returns the user linked to an external identity and the link, or
// NotFound.
func (s *Server) linked(ctx context.Context, idpID, subject string) (*users.User, *users.Link, error) {
	l, err := s.users.Link(ctx, idpID, subject)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil, notFound("linked user")
	}
	if err != nil {
		return nil, nil, internalErr(err, "get link")
	}
	u, err := s.users.Get(ctx, l.UserID)
	if errors.Is(err, db.ErrNotFound) { // removed in between
		return nil, nil, notFound("linked user")
	}
	if err != nil {
		return nil, nil, internalErr(err, "get linked user")
	}
	return u, l, nil
}

// RegisterExternalUser creates an active human user without a password in
// the IdP's organization, linked to the external identity, in one push.
// The rules for the profile are those of RegisterUser and AddHumanUser.
func (s *Server) RegisterExternalUser(ctx context.Context, req *directoryv1.RegisterExternalUserRequest) (*directoryv1.RegisterExternalUserResponse, error) {
	m := req
	var f apierr.Fields
	checkExternal(&f, m.GetIdpId(), m.GetExternalSubject())
	f.Check(apierr.Length("external_user_name", m.GetExternalUserName(), 0, 200))
	f.Check(apierr.Length("display_name", m.GetDisplayName(), 0, 200))
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
	p, err := s.activeIdP(ctx, m.GetIdpId())
	if err != nil {
		return nil, err
	}
	if err := checkIssuer(p, m.GetIssuer()); err != nil {
		return nil, err
	}
	org, err := s.orgs.Get(ctx, p.OrgID)
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	verified := m.GetEmailVerified()
	if verified {
		// Another user's verified address is not this identity's to
		// claim: it is registered unverified (a name equal to the
		// address is refused as taken, and authn offers the link page).
		taken, err := s.userCmds.VerifiedEmailTaken(ctx, org.ID, m.GetEmail())
		if err != nil {
			return nil, internalErr(err, "check e-mail")
		}
		verified = !taken
	}
	id, _, err := s.userCmds.AddExternalHuman(ctx, "self-registration", org, users.HumanAdded{
		UserName: m.GetUserName(), FirstName: m.GetFirstName(), LastName: m.GetLastName(),
		DisplayName:       displayName(m.GetDisplayName(), m.GetFirstName(), m.GetLastName()),
		PreferredLanguage: m.GetPreferredLanguage(), Email: m.GetEmail(), EmailVerified: verified, EmailProof: idpProof(p, verified),
	}, external(p, m.GetExternalSubject(), m.GetExternalUserName()))
	if err != nil {
		return nil, asInternal(err, "register external user")
	}
	u, err := s.users.Get(ctx, id)
	if err != nil {
		return nil, internalErr(err, "read registered user")
	}
	return &directoryv1.RegisterExternalUserResponse{User: userProto(u)}, nil
}

// UnlinkExternalUser removes the link of an external identity. An unknown
// IdP has no links, so it is NotFound like a missing link.
func (s *Server) UnlinkExternalUser(ctx context.Context, req *directoryv1.UnlinkExternalUserRequest) (*directoryv1.UnlinkExternalUserResponse, error) {
	m := req
	var f apierr.Fields
	checkExternal(&f, m.GetIdpId(), m.GetExternalSubject())
	if err := f.Err("LINK-invalid"); err != nil {
		return nil, err
	}
	u, l, err := s.linked(ctx, m.GetIdpId(), m.GetExternalSubject())
	if err != nil {
		return nil, err
	}
	if _, err := s.userCmds.RemoveLink(ctx, u.ID, u, l); err != nil {
		return nil, asInternal(err, "unlink")
	}
	return &directoryv1.UnlinkExternalUserResponse{}, nil
}

// displayName is the given display name, else first and last name.
func displayName(given, first, last string) string {
	if d := strings.TrimSpace(given); d != "" {
		return d
	}
	return strings.TrimSpace(first + " " + last)
}

// idpProof is how far a provider's email_verified counts: a provider an
// IAM owner trusts proves the address; one only its organization vouches
// for is that organization's word (users.ProofOrg), which counts within
// the organization's verified domains only. Otherwise a tenant could
// point its provider at a server asserting anyone's address.
func idpProof(p *idps.IDP, verified bool) users.Proof {
	switch {
	case !verified:
		return ""
	case p.TrustAMR:
		return users.ProofIdP
	default:
		return users.ProofOrg
	}
}
