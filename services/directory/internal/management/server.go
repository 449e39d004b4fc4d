// Package management implements the public ManagementService: one file per
// group of operations, each validating its request against the seed's and
// ZITADEL's rules, producing events through the domain packages and
// answering with details computed from the events. Authentication and the
// organization come from authz (the Caller in the context).
package management

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/cutoff"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// Server implements managementv1connect.ManagementServiceHandler.
type Server struct {
	managementv1connect.UnimplementedManagementServiceHandler

	ES       *eventstore.Store
	Orgs     *orgs.Queries
	OrgCmds  *orgs.Commands
	Users    *users.Queries
	UserCmds *users.Commands
	// IdPSecrets encrypts IdP client secrets at rest.
	IdPSecrets *secrets.Cipher
	// Hasher hashes client and machine secrets and recovery codes.
	Hasher *secrets.Hasher
	// Factors seals users' TOTP seeds.
	Factors users.FactorSecrets
	// WebAuthn is the issuer's relying party for security keys and
	// passkeys (nil on an issuer whose host is an IP address).
	WebAuthn *users.WebAuthn
	Issuer   *url.URL
	Logger   *slog.Logger
	Now      func() time.Time
	// IdPEgress is where calls to identity providers may go (authn dials
	// through the same policy): an issuer naming a refused address is
	// refused when an IdP is added or updated.
	IdPEgress netguard.Policy
	// Cutoffs delivers the token revocations that deactivations, removals
	// and password resets queue (nil: left to the background delivery).
	Cutoffs *cutoff.Outbox
	// Mail sends reset links (nil: no relay, the calls that mail answer
	// FailedPrecondition).
	Mail *mail.Outbox
	// DomainCheck looks for a domain's validation token (over HTTP
	// through the egress policy, in DNS through the configured resolver).
	DomainCheck orgs.Checker
}

// cutAccess delivers the token revocation the call just queued.
func (s *Server) cutAccess(ctx context.Context) {
	if s.Cutoffs != nil {
		s.Cutoffs.DeliverNow(ctx)
	}
}

var _ managementv1connect.ManagementServiceHandler = (*Server)(nil)

const svc = "/" + managementv1connect.ManagementServiceName + "/"

// Rules is the management API's authorization table: every procedure's
// permission, where its organization comes from, and which user it
// changes or which roles it grants (role dominance, see package authz).
// authz refuses procedures missing here; SECURITY.md shows this table.
func Rules() map[string]authz.Rule {
	user := func(p authz.Permission, field string) authz.Rule {
		return authz.Rule{Permission: p, Org: authz.OrgFromHeader, TargetUser: field}
	}
	read := func(p authz.Permission) authz.Rule { return authz.Rule{Permission: p, Org: authz.OrgFromHeader} }
	self := func(field string) authz.Rule {
		return authz.Rule{Permission: authz.UserManager, Org: authz.OrgFromHeader, TargetUser: field, Self: true}
	}
	r := map[string]authz.Rule{
		"GetMyOrg": read(authz.AnyRole),
		"AddOrg":   {Permission: authz.IAMOwner, Org: authz.OrgNew},
		// Lists only the organizations where the caller holds a role (all
		// for an IAM owner): the handler filters, so no role is needed.
		"ListOrgs": {Permission: authz.Authenticated, Org: authz.OrgNone},
		// An org owner must never make its own app able to sign in every
		// organization's users.
		"SetAppAdminClient": read(authz.IAMOwner),
		// Whether a provider's "amr" is believed: an organization owner
		// configures the provider, so it must not vouch for it.
		"SetOrgIDPTrust": read(authz.IAMOwner),

		"GetUserByID":      read(authz.UserManager),
		"ListUsers":        read(authz.UserManager),
		"AddHumanUser":     read(authz.UserManager),
		"ImportHumanUser":  read(authz.UserManager),
		"AddMachineUser":   read(authz.UserManager),
		"ListMachineKeys":  read(authz.UserManager),
		"ListUserMetadata": read(authz.UserManager),
		"ListUserIDPs":     read(authz.UserManager),
		"GetUserMetadata":  read(authz.UserManager),

		"DeactivateUser":   user(authz.UserManager, "id"),
		"ReactivateUser":   user(authz.UserManager, "id"),
		"UnlockUser":       user(authz.UserManager, "id"),
		"RemoveUser":       user(authz.UserManager, "id"),
		"SetHumanPassword": user(authz.UserManager, "user_id"),
		// A reset link or code is a credential: only for a user the
		// caller dominates; the user sets its own password with a code.
		"SendHumanResetPasswordNotification": user(authz.UserManager, "user_id"),
		"PasswordReset":                      user(authz.UserManager, "user_id"),
		"SetPassword":                        self("user_id"),
		// An address verified, or a code to verify it, is a credential
		// too (sign-in by e-mail, relying parties keying on it): only for
		// a user the caller dominates; the user sets its own address and
		// verifies it with the code mailed to it.
		"UpdateHumanEmail":             user(authz.UserManager, "user_id"),
		"ResendHumanEmailVerification": user(authz.UserManager, "user_id"),
		"ResendHumanInitialization":    user(authz.UserManager, "user_id"),
		"SetEmail":                     self("user_id"),
		"VerifyEmail":                  self("user_id"),
		"ResendEmailCode":              self("user_id"),
		"AddMachineKey":                user(authz.UserManager, "user_id"),
		"RemoveMachineKey":             user(authz.UserManager, "user_id"),
		"GenerateMachineSecret":        user(authz.UserManager, "user_id"),
		"RemoveMachineSecret":          user(authz.UserManager, "user_id"),
		"SetUserMetadata":              user(authz.UserManager, "id"),
		"BulkSetUserMetadata":          user(authz.UserManager, "id"),
		"RemoveUserMetadata":           user(authz.UserManager, "id"),
		"BulkRemoveUserMetadata":       user(authz.UserManager, "id"),
		"RemoveUserIDP":                user(authz.UserManager, "user_id"),

		// Second factors: the user's own, or a user manager's who
		// dominates the user (a user manager cannot remove an owner's).
		"RegisterTOTP":              self("user_id"),
		"VerifyTOTPRegistration":    self("user_id"),
		"RemoveTOTP":                self("user_id"),
		"ListHumanAuthFactors":      self("user_id"),
		"RemoveHumanAuthFactorOTP":  user(authz.UserManager, "user_id"),
		"RegisterU2F":               self("user_id"),
		"VerifyU2FRegistration":     self("user_id"),
		"RemoveU2F":                 self("user_id"),
		"RegisterPasskey":           self("user_id"),
		"VerifyPasskeyRegistration": self("user_id"),
		"ListPasskeys":              self("user_id"),
		"RemovePasskey":             self("user_id"),
		"ListHumanPasswordless":     self("user_id"),
		"RemoveHumanAuthFactorU2F":  user(authz.UserManager, "user_id"),
		"RemoveHumanPasswordless":   user(authz.UserManager, "user_id"),

		"ListOrgMembers":  read(authz.OrgOwner),
		"AddOrgMember":    {Permission: authz.OrgOwner, Org: authz.OrgFromHeader, TargetUser: "user_id", Members: true, OwnUsers: true, GrantRoles: "roles"},
		"RemoveOrgMember": {Permission: authz.OrgOwner, Org: authz.OrgFromHeader, TargetUser: "user_id", Members: true},
	}
	for _, m := range []string{
		"GetOrgIDPByID", "ListOrgIDPs", "AddOrgOIDCIDP", "UpdateOrgIDPOIDCConfig", "DeactivateOrgIDP", "ReactivateOrgIDP",
		"RemoveOrgIDP", "AddProject", "GetProjectByID", "ListProjects", "GetAppByID", "ListApps", "AddOIDCApp", "UpdateOIDCAppConfig",
		"RegenerateOIDCClientSecret", "AddAPIApp", "AddAppKey", "RemoveAppKey",
		"AddProjectGrant", "ListProjectGrants", "UpdateProjectGrant", "RemoveProjectGrant",
		// The granted organization's side: see and refuse what others
		// granted it (its users' identities go to their projects).
		"ListGrantedProjects", "RefuseGrantedProject",
		// Whether users may be impersonated: the organization's consent;
		// the role that acts on it only an IAM owner grants.
		"GetSecurityPolicy", "SetSecurityPolicy",
		"GetLoginPolicy", "AddCustomLoginPolicy", "UpdateCustomLoginPolicy", "ResetLoginPolicyToDefault",
		"ListLoginPolicySecondFactors", "AddSecondFactorToLoginPolicy", "RemoveSecondFactorFromLoginPolicy",
		"ListLoginPolicyMultiFactors", "AddMultiFactorToLoginPolicy", "RemoveMultiFactorFromLoginPolicy",
		// A verified domain makes the organization's marks on addresses
		// in it count (the email_verified claim): an owner's matter.
		"AddOrgDomain", "GenerateOrgDomainValidation", "ValidateOrgDomain", "ListOrgDomains", "RemoveOrgDomain", "SetPrimaryOrgDomain",
	} {
		r[m] = read(authz.OrgOwner)
	}
	// An admin client is the instance's: changing one takes an IAM owner.
	for _, m := range []string{"UpdateOIDCAppConfig", "RegenerateOIDCClientSecret", "AddAppKey", "RemoveAppKey"} {
		r[m] = authz.Rule{Permission: authz.OrgOwner, Org: authz.OrgFromHeader, AdminApp: "app_id"}
	}
	out := make(map[string]authz.Rule, len(r))
	for m, rule := range r {
		out[svc+m] = rule
	}
	return out
}
