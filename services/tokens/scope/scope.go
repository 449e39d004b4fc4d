// Package scope parses and checks OAuth scopes: the OIDC scopes Gatehouse
// knows and its reserved urn:gatehouse:iam:... scopes. An unknown scope is
// invalid_scope (seed: "scope invalid, unknown, malformed").
package scope

import (
	"slices"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
)

// Known scopes.
const (
	OpenID        = "openid"
	Profile       = "profile"
	Email         = "email"
	Phone         = "phone"
	Address       = "address"
	OfflineAccess = "offline_access"

	ProjectAudPrefix = "urn:gatehouse:iam:org:project:id:"
	ProjectAudSuffix = ":aud"
	OrgPrefix        = "urn:gatehouse:iam:org:id:"
	// IdPPrefix names an identity provider of the login's organization:
	// the authorization request goes straight to it.
	IdPPrefix     = "urn:gatehouse:iam:org:idp:id:"
	UserMetadata  = "urn:gatehouse:iam:user:metadata"
	ResourceOwner = "urn:gatehouse:iam:user:resourceowner"
)

var standard = []string{OpenID, Profile, Email, Phone, Address, OfflineAccess, UserMetadata, ResourceOwner}

// Parse splits a space-delimited scope parameter, drops duplicates keeping
// the first order, and refuses unknown or malformed values.
func Parse(raw string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(raw, " ") {
		if s == "" {
			continue
		}
		if slices.Contains(out, s) {
			continue
		}
		if !valid(s) {
			if rest, ok := strings.CutPrefix(s, "urn:zitadel:"); ok {
				// Running without the audience or organization the caller
				// meant would be worse than refusing: name ours.
				return nil, oauth.New(oauth.InvalidScope, "unknown scope %q: Gatehouse's reserved scopes are urn:gatehouse:… (here %q)",
					s, "urn:gatehouse:"+strings.ReplaceAll(rest, ":zitadel:", ":gatehouse:"))
			}
			return nil, oauth.New(oauth.InvalidScope, "unknown scope %q", s)
		}
		out = append(out, s)
	}
	return out, nil
}

func valid(s string) bool {
	if slices.Contains(standard, s) {
		return true
	}
	if id, ok := cutProject(s); ok {
		return idOK(id)
	}
	if id, ok := cutOrg(s); ok {
		return idOK(id)
	}
	if id, ok := strings.CutPrefix(s, IdPPrefix); ok {
		return idOK(id)
	}
	return false
}

// IdP returns the identity provider id the shortcut scope names, if any.
func IdP(scopes []string) string {
	for _, s := range scopes {
		if id, ok := strings.CutPrefix(s, IdPPrefix); ok {
			return id
		}
	}
	return ""
}

// cutProject returns the project id of a project-audience scope.
func cutProject(s string) (string, bool) {
	id, ok := strings.CutPrefix(s, ProjectAudPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(id, ProjectAudSuffix)
}

// cutOrg returns the organization id of an organization scope.
func cutOrg(s string) (string, bool) { return strings.CutPrefix(s, OrgPrefix) }

func idOK(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == ':' || r > '~' {
			return false
		}
	}
	return true
}

// Projects returns the project ids added to the audience by reserved scopes.
func Projects(scopes []string) []string {
	var out []string
	for _, s := range scopes {
		if id, ok := cutProject(s); ok {
			out = append(out, id)
		}
	}
	return out
}

// Org returns the organization id a reserved scope names, if any.
func Org(scopes []string) string {
	for _, s := range scopes {
		if id, ok := cutOrg(s); ok {
			return id
		}
	}
	return ""
}

// Without returns scopes minus drop.
func Without(scopes []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return s == drop })
}

// Audience builds aud: the first values (client id, project id), then each
// reserved-scope project, without duplicates.
func Audience(first []string, scopes []string) []string {
	var out []string
	for _, a := range append(slices.Clone(first), Projects(scopes)...) {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
