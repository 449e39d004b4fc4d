// Package management implements the public ManagementService: one file per
// group of operations, each validating its request against the seed's and
// ZITADEL's rules, producing events through the domain packages and
// answering with details computed from the events. Authentication and the
// organization come from authz (the Caller in the context).
package management

import (
	"log/slog"
	"net/url"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
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
	// Hasher hashes client and machine secrets.
	Hasher *secrets.Hasher
	Issuer *url.URL
	Logger *slog.Logger
	Now    func() time.Time
}

var _ managementv1connect.ManagementServiceHandler = (*Server)(nil)

const svc = "/" + managementv1connect.ManagementServiceName + "/"

// Permissions maps every procedure to the permission it requires; authz
// refuses procedures missing here.
func Permissions() map[string]authz.Permission {
	p := map[string]authz.Permission{}
	for _, m := range []string{
		"GetUserByID", "ListUsers", "AddHumanUser", "ImportHumanUser", "AddMachineUser", "DeactivateUser",
		"ReactivateUser", "RemoveUser", "SetHumanPassword", "AddMachineKey", "ListMachineKeys", "RemoveMachineKey",
		"GenerateMachineSecret", "RemoveMachineSecret", "SetUserMetadata", "BulkSetUserMetadata", "ListUserMetadata",
		"GetUserMetadata", "RemoveUserMetadata", "BulkRemoveUserMetadata",
	} {
		p[svc+m] = authz.UserManager
	}
	for _, m := range []string{
		"AddOrgMember", "RemoveOrgMember", "GetOrgIDPByID", "ListOrgIDPs", "AddOrgOIDCIDP", "UpdateOrgIDPOIDCConfig",
		"DeactivateOrgIDP", "ReactivateOrgIDP", "RemoveOrgIDP", "AddProject", "GetProjectByID", "GetAppByID",
		"AddOIDCApp", "UpdateOIDCAppConfig", "RegenerateOIDCClientSecret", "AddAPIApp", "AddAppKey", "RemoveAppKey",
	} {
		p[svc+m] = authz.OrgOwner
	}
	p[svc+"GetMyOrg"] = authz.AnyRole
	p[svc+"AddOrg"] = authz.IAMOwner
	return p
}
