package internalapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/cutoff"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Server implements directoryv1connect.DirectoryServiceHandler.
type Server struct {
	directoryv1connect.UnimplementedDirectoryServiceHandler

	ES     *eventstore.Store
	Logger *slog.Logger
	Now    func() time.Time
	// IdPSecrets opens IdP client secrets (secrets.PurposeIdPSecrets) for
	// GetIdP.
	IdPSecrets *secrets.Cipher
	// Factors seal TOTP seeds and hash recovery codes.
	Factors FactorKeys
	// Cutoffs delivers at once the token revocations a sign-out
	// everywhere queues (nil: left to the background delivery).
	Cutoffs *cutoff.Outbox
	// Dominance decides impersonations (AuthorizeTokenExchange); nil
	// refuses every one.
	Dominance DominanceFunc
	// Mail sends the self-service mails (a zero Mail: none can be sent);
	// set it with SetMail.
	Mail Mail

	orgs     *orgs.Queries
	users    *users.Queries
	userCmds *users.Commands
	lock     *lockout.Store
	dummy    string // hash verified when no real one may be, so timing does not tell
	// verify checks a password against a hash (secrets.VerifyPassword;
	// tests count the calls).
	verify func(ctx context.Context, password, encoded string) (ok, rehash bool, err error)
	// resets holds a slot per password reset in flight.
	resets chan struct{}
}

// New returns the internal API over es; idpSecrets opens IdP client
// secrets.
func New(es *eventstore.Store, logger *slog.Logger, now func() time.Time, idpSecrets *secrets.Cipher) (*Server, error) {
	if idpSecrets == nil {
		return nil, errors.New("internalapi: no IdP secret cipher")
	}
	if now == nil {
		now = time.Now
	}
	dummy, err := secrets.HashPassword(context.Background(), secrets.RandomToken(16))
	if err != nil {
		return nil, err
	}
	uq := &users.Queries{DB: es.DB()}
	return &Server{
		ES: es, Logger: logger, Now: now, IdPSecrets: idpSecrets,
		orgs:     &orgs.Queries{DB: es.DB()},
		users:    uq,
		userCmds: &users.Commands{ES: es, Q: uq},
		lock:     &lockout.Store{DB: es.DB(), Now: now},
		dummy:    dummy,
		resets:   make(chan struct{}, resetWork),
		verify:   secrets.VerifyPassword,
	}, nil
}

var _ directoryv1connect.DirectoryServiceHandler = (*Server)(nil)

// internalErr reports that what failed: Unavailable when the database
// could not answer (db.IsUnavailable), so that the caller answers its own
// client with a retry hint or serves from its cache, else Internal.
func internalErr(err error, what string) error {
	code := connect.CodeInternal
	if db.IsUnavailable(err) {
		code = connect.CodeUnavailable
	}
	return connect.NewError(code, fmt.Errorf("%s: %w", what, err))
}

func notFound(what string) error {
	return connect.NewError(connect.CodeNotFound, errors.New(what+" not found"))
}

// userProto renders a user for authn and tokens.
func userProto(u *users.User) *directoryv1.User {
	state := directoryv1.UserState_USER_STATE_ACTIVE
	switch u.State {
	case users.StateInactive:
		state = directoryv1.UserState_USER_STATE_INACTIVE
	case users.StateLocked:
		state = directoryv1.UserState_USER_STATE_LOCKED
	case users.StateInitial:
		state = directoryv1.UserState_USER_STATE_INITIAL
	}
	tt := directoryv1.TokenType_TOKEN_TYPE_OPAQUE
	if u.AccessTokenType == 1 {
		tt = directoryv1.TokenType_TOKEN_TYPE_JWT
	}
	p := &directoryv1.User{
		Id:                 u.ID,
		OrgId:              u.OrgID,
		UserName:           u.UserName,
		PreferredLoginName: u.LoginName(),
		State:              state,
		Machine:            u.Type == users.TypeMachine,
		EmailVerified:      u.EmailVerified,
		EmailProven:        u.EmailProven,
		DisplayName:        u.DisplayName,
		PreferredLanguage:  u.PreferredLanguage,
		AccessTokenType:    tt,
		Email:              u.Email,
		// An admin set the password: every sign-in (a federated one too)
		// goes through the change first.
		PasswordChangeRequired: u.PasswordChangeRequired,
	}
	if u.SessionsNotBefore != nil {
		p.SessionsNotBefore = timestamppb.New(*u.SessionsNotBefore)
	}
	return p
}

// GetUser returns a user by id.
func (s *Server) GetUser(ctx context.Context, req *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error) {
	u, err := s.users.Get(ctx, req.GetUserId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("user")
	}
	if err != nil {
		return nil, internalErr(err, "get user")
	}
	return &directoryv1.GetUserResponse{User: userProto(u)}, nil
}

// lookup finds a user of org by login name: userName@primaryDomain, the
// bare userName, or a verified e-mail (unless the organization's login
// policy disables login by e-mail), each compared in normalised form
// (users.NormalizeName; unique per organization) and exactly; an e-mail
// shared by several users matches none.
func (s *Server) lookup(ctx context.Context, orgID, login string) (*users.User, error) {
	login = strings.TrimSpace(login)
	if login == "" || orgID == "" {
		return nil, db.ErrNotFound
	}
	var found []users.User
	if i := strings.LastIndex(login, "@"); i > 0 {
		// User names may themselves contain "@": the domain is what
		// follows the last one.
		if err := s.ES.DB().Select(ctx, &found, `SELECT `+users.Columns+users.From+`
			WHERE u.org_id = ? AND u.user_name_norm = ? AND LOWER(o.primary_domain) = ?`,
			orgID, users.NormalizeName(login[:i]), strings.ToLower(login[i+1:])); err != nil {
			return nil, err
		}
		if len(found) == 1 {
			return &found[0], nil
		}
	}
	found = found[:0]
	if err := s.ES.DB().Select(ctx, &found, `SELECT `+users.Columns+users.From+`
		WHERE u.org_id = ? AND u.user_name_norm = ?`, orgID, users.NormalizeName(login)); err != nil {
		return nil, err
	}
	if len(found) == 1 {
		return &found[0], nil
	}
	if strings.Contains(login, "@") {
		// The organization's login policy may turn login by e-mail off.
		if lp, err := s.orgs.LoginPolicy(ctx, orgID); err != nil {
			return nil, err
		} else if lp.DisableLoginWithEmail {
			return nil, db.ErrNotFound
		}
		if err := s.ES.DB().Select(ctx, &found, `SELECT `+users.Columns+users.From+`
			WHERE u.org_id = ? AND u.type = ? AND LOWER(u.email) = ? AND u.email_verified = ? LIMIT 2`,
			orgID, users.TypeHuman, strings.ToLower(login), true); err != nil {
			return nil, err
		}
		if len(found) == 1 {
			return &found[0], nil
		}
	}
	return nil, db.ErrNotFound
}

// LookupUser finds a user of an organization by login name.
func (s *Server) LookupUser(ctx context.Context, req *directoryv1.LookupUserRequest) (*directoryv1.LookupUserResponse, error) {
	u, err := s.lookup(ctx, req.GetOrgId(), req.GetLoginName())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("user")
	}
	if err != nil {
		return nil, internalErr(err, "lookup user")
	}
	return &directoryv1.LookupUserResponse{User: userProto(u)}, nil
}

// GetOrg returns an organization and its password policy.
func (s *Server) GetOrg(ctx context.Context, req *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error) {
	o, lp, err := s.orgs.GetWithLoginPolicy(ctx, req.GetOrgId())
	if errors.Is(err, db.ErrNotFound) {
		return nil, notFound("organization")
	}
	if err != nil {
		return nil, internalErr(err, "get org")
	}
	p := o.PasswordPolicy
	return &directoryv1.GetOrgResponse{
		LoginPolicy: loginPolicyProto(lp),
		Id:          o.ID, Name: o.Name, PrimaryDomain: o.PrimaryDomain, Active: o.State == orgs.StateActive,
		PasswordPolicy: &directoryv1.PasswordPolicy{
			MinLength: uint32(p.MinLength), HasUppercase: p.HasUppercase, HasLowercase: p.HasLowercase,
			HasNumber: p.HasNumber, HasSymbol: p.HasSymbol, History: uint32(p.History),
		},
	}, nil
}

// GetRoles returns a user's roles in an organization.
func (s *Server) GetRoles(ctx context.Context, req *directoryv1.GetRolesRequest) (*directoryv1.GetRolesResponse, error) {
	roles, err := s.orgs.Roles(ctx, req.GetUserId(), req.GetOrgId())
	if err != nil {
		return nil, internalErr(err, "get roles")
	}
	return &directoryv1.GetRolesResponse{Roles: roles}, nil
}

// loginPolicyProto renders what authn enforces of a login policy.
func loginPolicyProto(lp orgs.LoginPolicy) *directoryv1.LoginPolicy {
	return &directoryv1.LoginPolicy{AllowUsernamePassword: lp.AllowUsernamePassword, AllowRegister: lp.AllowRegister,
		IgnoreUnknownUsernames: lp.IgnoreUnknownUsernames, AllowExternalIdp: lp.AllowExternalIDP,
		ForceMfa: lp.ForceMFA, ForceMfaLocalOnly: lp.ForceMFALocalOnly, SecondFactors: secondFactorNames(lp.SecondFactors),
		PasswordlessAllowed:        lp.PasswordlessType == passwordlessAllowed,
		PasswordCheckLifetime:      durationpb.New(lp.PasswordCheckLifetime),
		SecondFactorCheckLifetime:  durationpb.New(lp.SecondFactorCheckLifetime),
		MultiFactorCheckLifetime:   durationpb.New(lp.MultiFactorCheckLifetime),
		ExternalLoginCheckLifetime: durationpb.New(lp.ExternalLoginCheckLifetime),
		HidePasswordReset:          lp.HidePasswordReset, RequireVerifiedEmail: lp.RequireVerifiedEmail}
}

// passwordlessAllowed is ZITADEL's PASSWORDLESS_TYPE_ALLOWED.
const passwordlessAllowed = 1

// secondFactorNames names the login policy's second factors (ZITADEL's
// SecondFactorType numbers) as the factor types of package users; the
// kinds Gatehouse does not offer (OTP by e-mail or SMS) are left out.
func secondFactorNames(types []int32) []string {
	var out []string
	for _, t := range types {
		switch t {
		case 1:
			out = append(out, users.FactorOTP)
		case 2:
			out = append(out, users.FactorU2F)
		}
	}
	return out
}
