package scope

import (
	"slices"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// ManagementAudience is the reserved project id of the management and
// admin APIs; ManagementAudienceScope asks for it.
const (
	ManagementAudience      = "gatehouse"
	ManagementAudienceScope = ProjectAudPrefix + ManagementAudience + ProjectAudSuffix
)

// Kind is who asks for scopes: the client of the request.
type Kind string

// Client kinds.
const (
	// MachineUser: a machine user acting for itself (client_credentials,
	// JWT profile). No person is involved.
	MachineUser Kind = "machine_user"
	// App: an ordinary application signing a person in (authorization
	// request, the code exchange and refreshes that follow).
	App Kind = "app"
	// AdminApp: an application an IAM owner marked as an admin client (the
	// CLI's native app is one). It signs in users of every organization;
	// what they may do is decided by their roles.
	AdminApp Kind = "admin_app"
)

// Reserved names a family of reserved scopes.
type Reserved string

// Reserved scope families.
const (
	ReservedManagement Reserved = "management_audience" // urn:gatehouse:iam:org:project:id:gatehouse:aud
	ReservedProject    Reserved = "project_audience"    // urn:gatehouse:iam:org:project:id:{id}:aud, id != gatehouse
	ReservedOrg        Reserved = "org"                 // urn:gatehouse:iam:org:id:{id}
)

// Reach is how far a kind may go with a reserved scope.
type Reach int

// Reaches, narrowest first.
const (
	// Never: the scope is invalid_scope for this kind.
	Never Reach = iota
	// Interactive: allowed, except in a request that may not show a page
	// (prompt=none): a person must be present.
	Interactive
	// OwnOrg: only ids of the client's own organization: its own org id,
	// or projects of its organization.
	OwnOrg
	// OwnOrGranted: the own organization, or one the app's project is
	// granted to.
	OwnOrGranted
	// Always: any id (existence is checked where it is used).
	Always
)

// Rule is one row of the reserved-scope table.
type Rule struct {
	Kind     Kind
	Reserved Reserved
	Reach    Reach
}

// Rules is the reserved-scope policy: which reserved scopes each client
// kind may request. A missing row is Never (fail closed). SECURITY.md
// shows this table.
var Rules = []Rule{
	{MachineUser, ReservedManagement, Always}, // for itself; its roles decide
	{MachineUser, ReservedProject, OwnOrg},
	{MachineUser, ReservedOrg, OwnOrg},

	{App, ReservedManagement, Never}, // an ordinary app never holds the admin API's audience
	{App, ReservedProject, OwnOrg},
	{App, ReservedOrg, OwnOrGranted},

	{AdminApp, ReservedManagement, Interactive}, // never silently (prompt=none)
	{AdminApp, ReservedProject, Never},          // its tokens carry the management audience only
	{AdminApp, ReservedOrg, Always},
}

// RuleFor returns the reach of kind for a reserved scope family.
func RuleFor(kind Kind, r Reserved) Reach {
	for _, rule := range Rules {
		if rule.Kind == kind && rule.Reserved == r {
			return rule.Reach
		}
	}
	return Never
}

// Requester describes the client asking for scopes.
type Requester struct {
	Kind Kind
	// OrgID is the client's organization.
	OrgID string
	// Projects are the project ids of OrgID (the project audiences the
	// client may target).
	Projects []string
	// GrantedOrgs are the organizations the app's project is granted to.
	GrantedOrgs []string
	// NoInteraction: the request may not show a page (prompt=none).
	NoInteraction bool
}

// Classify returns the reserved family of s and the id it names, or ""
// for an unreserved scope.
func Classify(s string) (Reserved, string) {
	if id, ok := cutProject(s); ok {
		if id == ManagementAudience {
			return ReservedManagement, id
		}
		return ReservedProject, id
	}
	if id, ok := cutOrg(s); ok {
		return ReservedOrg, id
	}
	return "", ""
}

// Check refuses (invalid_scope) every reserved scope in scopes that r may
// not request.
func Check(r Requester, scopes []string) error {
	for _, s := range scopes {
		fam, id := Classify(s)
		if fam == "" {
			continue
		}
		if !r.allows(fam, id) {
			return oauth.New(oauth.InvalidScope, "scope %q is not allowed for this client", s)
		}
	}
	return nil
}

func (r Requester) allows(fam Reserved, id string) bool {
	switch RuleFor(r.Kind, fam) {
	case Always:
		return true
	case Interactive:
		return !r.NoInteraction
	case OwnOrg:
		return r.own(fam, id)
	case OwnOrGranted:
		return r.own(fam, id) || (fam == ReservedOrg && slices.Contains(r.GrantedOrgs, id))
	}
	return false
}

func (r Requester) own(fam Reserved, id string) bool {
	switch fam {
	case ReservedOrg:
		return id != "" && id == r.OrgID
	case ReservedProject:
		return slices.Contains(r.Projects, id)
	}
	return false
}

// UserOrgAllowed reports whether r may sign in a user of org userOrg: an
// app signs in users of its own organization and of organizations its
// project is granted to; an admin app users of every organization; a
// machine user only itself.
func UserOrgAllowed(r Requester, userOrg string) bool {
	switch r.Kind {
	case AdminApp:
		return true
	case App:
		return userOrg == r.OrgID || slices.Contains(r.GrantedOrgs, userOrg)
	}
	return userOrg == r.OrgID
}

// ForClient is the Requester of a client as the directory describes it
// (an app, an admin app, or a machine user with a secret).
func ForClient(c *directoryv1.Client) Requester {
	r := Requester{Kind: App, OrgID: c.GetOrgId(), Projects: c.GetOrgProjectIds(), GrantedOrgs: c.GetGrantedOrgIds()}
	switch {
	case c.GetKind() == directoryv1.ClientKind_CLIENT_KIND_MACHINE_USER:
		r.Kind, r.GrantedOrgs = MachineUser, nil
	case c.GetAdminClient():
		r.Kind = AdminApp
	}
	return r
}
