package internalapi

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

var authMethods = map[string]directoryv1.AuthMethod{
	projects.AuthBasic:         directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_BASIC,
	projects.AuthPost:          directoryv1.AuthMethod_AUTH_METHOD_CLIENT_SECRET_POST,
	projects.AuthNone:          directoryv1.AuthMethod_AUTH_METHOD_NONE,
	projects.AuthPrivateKeyJWT: directoryv1.AuthMethod_AUTH_METHOD_PRIVATE_KEY_JWT,
}

// appClient returns the application with clientID as a client, or nil when
// no application has it.
func (s *Server) appClient(ctx context.Context, clientID string) (*directoryv1.Client, error) {
	pq := &projects.Queries{DB: s.ES.DB()}
	a, err := pq.AppByClientID(ctx, clientID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	projectIDs, err := pq.ActiveProjectIDs(ctx, a.OrgID)
	if err != nil {
		return nil, err
	}
	grants, err := pq.ActiveGrants(ctx, a.ProjectID)
	if err != nil {
		return nil, err
	}
	granted, grantIDs := make([]string, 0, len(grants)), make(map[string]string, len(grants))
	for _, g := range grants {
		granted = append(granted, g.GrantedOrgID)
		grantIDs[g.GrantedOrgID] = g.GrantID
	}
	c := &directoryv1.Client{
		ClientId:      a.ClientID,
		Id:            a.ID,
		ProjectId:     a.ProjectID,
		OrgId:         a.OrgID,
		Active:        a.Active(),
		AuthMethod:    authMethods[a.AuthMethod()],
		Sequence:      a.Sequence,
		Name:          a.Name,
		AdminClient:   a.AdminClient,
		OrgProjectIds: projectIDs,
		GrantedOrgIds: granted,
		GrantIds:      grantIDs,
	}
	// A secret left over from an earlier auth method must not authenticate.
	if a.UsesSecret() {
		c.SecretHash = a.SecretHash
	}
	for _, k := range a.Keys {
		pk := &directoryv1.PublicKey{KeyId: k.ID, PublicKeyPem: k.PublicKey}
		if k.Expiration != nil {
			pk.ExpiresAt = timestamppb.New(*k.Expiration)
		}
		c.Keys = append(c.Keys, pk)
	}
	switch {
	case a.OIDC != nil:
		o := a.OIDC
		c.Kind = directoryv1.ClientKind_CLIENT_KIND_OIDC_APP
		c.RedirectUris = o.RedirectURIs
		c.PostLogoutRedirectUris = o.PostLogoutRedirectURIs
		c.ResponseTypes = o.ResponseTypes
		c.GrantTypes = o.GrantTypes
		c.IdTokenUserinfoAssertion = o.IDTokenUserinfoAssertion
		c.ClockSkew = durationpb.New(o.ClockSkew)
		c.AppType = o.AppType
		c.RequirePushedAuthorizationRequests = o.RequirePAR
		c.DpopBoundAccessTokens = o.DPoPBound
		c.BackChannelLogoutUri = o.BackChannelLogoutURI
		c.AccessTokenType = directoryv1.TokenType_TOKEN_TYPE_OPAQUE
		if o.AccessTokenType == projects.AccessTokenJWT {
			c.AccessTokenType = directoryv1.TokenType_TOKEN_TYPE_JWT
		}
	case a.API != nil:
		c.Kind = directoryv1.ClientKind_CLIENT_KIND_API_APP
		c.AccessTokenType = directoryv1.TokenType_TOKEN_TYPE_OPAQUE
	}
	return c, nil
}
