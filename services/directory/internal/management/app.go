package management

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// checkAppIDs validates the ids naming an app, the request's project_id
// and app_id: 1-200 characters, the maximum a string.max_len rule of the
// proto, in lim.
func checkAppIDs(f *apierr.Fields, lim *apierr.Limits, projectID, appID string) {
	f.Check(lim.Length("project_id", "project_id", projectID, 1))
	f.Check(lim.Length("app_id", "app_id", appID, 1))
}

// app loads an app of a project of the target organization; both unknown
// projects and apps of another project are NotFound.
// appByIDs checks the ids of a request naming an app (and any other limit
// of the request in lim), then loads it.
func (s *Server) appByIDs(ctx context.Context, lim *apierr.Limits, projectID, appID string) (*projects.Project, *projects.App, error) {
	var f apierr.Fields
	checkAppIDs(&f, lim, projectID, appID)
	lim.Rest(&f)
	if err := f.Err("APP-invalid-id"); err != nil {
		return nil, nil, err
	}
	return s.app(ctx, projectID, appID)
}

func (s *Server) app(ctx context.Context, projectID, appID string) (*projects.Project, *projects.App, error) {
	p, err := s.project(ctx, projectID)
	if err != nil {
		return nil, nil, err
	}
	a, err := s.projectQueries().App(ctx, p.ID, appID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil, apierr.NotFound("APP-not-found", "application not found")
	}
	if err != nil {
		return nil, nil, err
	}
	return p, a, nil
}

// Enum mappings between the API and the stored OAuth vocabulary. An
// undefined API value maps to a marker the domain validation refuses.
var (
	oidcResponseTypes = map[managementv1.OIDCResponseType]string{
		managementv1.OIDCResponseType_OIDC_RESPONSE_TYPE_CODE:           projects.ResponseCode,
		managementv1.OIDCResponseType_OIDC_RESPONSE_TYPE_ID_TOKEN:       projects.ResponseIDToken,
		managementv1.OIDCResponseType_OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN: projects.ResponseIDTokenToken,
	}
	oidcGrantTypes = map[managementv1.OIDCGrantType]string{
		managementv1.OIDCGrantType_OIDC_GRANT_TYPE_AUTHORIZATION_CODE: projects.GrantAuthorizationCode,
		managementv1.OIDCGrantType_OIDC_GRANT_TYPE_IMPLICIT:           projects.GrantImplicit,
		managementv1.OIDCGrantType_OIDC_GRANT_TYPE_REFRESH_TOKEN:      projects.GrantRefreshToken,
		managementv1.OIDCGrantType_OIDC_GRANT_TYPE_DEVICE_CODE:        projects.GrantDeviceCode,
		managementv1.OIDCGrantType_OIDC_GRANT_TYPE_TOKEN_EXCHANGE:     projects.GrantTokenExchange,
	}
	oidcAppTypes = map[managementv1.OIDCAppType]string{
		managementv1.OIDCAppType_OIDC_APP_TYPE_WEB:        projects.AppTypeWeb,
		managementv1.OIDCAppType_OIDC_APP_TYPE_USER_AGENT: projects.AppTypeUserAgent,
		managementv1.OIDCAppType_OIDC_APP_TYPE_NATIVE:     projects.AppTypeNative,
	}
	oidcAuthMethods = map[managementv1.OIDCAuthMethodType]string{
		managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_BASIC:           projects.AuthBasic,
		managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_POST:            projects.AuthPost,
		managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_NONE:            projects.AuthNone,
		managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT: projects.AuthPrivateKeyJWT,
	}
	oidcTokenTypes = map[managementv1.OIDCTokenType]string{
		managementv1.OIDCTokenType_OIDC_TOKEN_TYPE_BEARER: projects.AccessTokenOpaque,
		managementv1.OIDCTokenType_OIDC_TOKEN_TYPE_JWT:    projects.AccessTokenJWT,
	}
	apiAuthMethods = map[managementv1.APIAuthMethodType]string{
		managementv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_BASIC:           projects.AuthBasic,
		managementv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT: projects.AuthPrivateKeyJWT,
	}
)

// appEnumToDomain maps an API enum value; undefined values become "undefined(n)".
func appEnumToDomain[E ~int32](m map[E]string, v E) string {
	if s, ok := m[v]; ok {
		return s
	}
	return "undefined(" + strconv.Itoa(int(v)) + ")"
}

// appEnumToAPI maps a stored value back to its API enum.
func appEnumToAPI[E ~int32](m map[E]string, s string) E {
	for k, v := range m {
		if v == s {
			return k
		}
	}
	return 0
}

func appEnumsToAPI[E ~int32](m map[E]string, in []string) []E {
	out := make([]E, len(in))
	for i, s := range in {
		out[i] = appEnumToAPI(m, s)
	}
	return out
}

func complianceToProto(ps []projects.Problem) []*managementv1.LocalizedMessage {
	var out []*managementv1.LocalizedMessage
	for _, p := range ps {
		out = append(out, &managementv1.LocalizedMessage{Key: p.Key, LocalizedMessage: p.Message})
	}
	return out
}

func oidcConfigToProto(clientID string, c *projects.OIDCConfig) *managementv1.OIDCConfig {
	problems := c.Compliance()
	out := &managementv1.OIDCConfig{
		RedirectUris:                       c.RedirectURIs,
		ResponseTypes:                      appEnumsToAPI(oidcResponseTypes, c.ResponseTypes),
		GrantTypes:                         appEnumsToAPI(oidcGrantTypes, c.GrantTypes),
		AppType:                            appEnumToAPI(oidcAppTypes, c.AppType),
		ClientId:                           clientID,
		AuthMethodType:                     appEnumToAPI(oidcAuthMethods, c.AuthMethod),
		PostLogoutRedirectUris:             c.PostLogoutRedirectURIs,
		Version:                            managementv1.OIDCVersion_OIDC_VERSION_1_0,
		NoneCompliant:                      len(problems) > 0,
		ComplianceProblems:                 complianceToProto(problems),
		DevMode:                            c.DevMode,
		AccessTokenType:                    appEnumToAPI(oidcTokenTypes, c.AccessTokenType),
		AccessTokenRoleAssertion:           c.AccessTokenRoleAssertion,
		IdTokenRoleAssertion:               c.IDTokenRoleAssertion,
		IdTokenUserinfoAssertion:           c.IDTokenUserinfoAssertion,
		ClockSkew:                          durationpb.New(c.ClockSkew),
		AdditionalOrigins:                  c.AdditionalOrigins,
		AllowedOrigins:                     c.AllowedOrigins(),
		SkipNativeAppSuccessPage:           c.SkipNativeAppSuccessPage,
		BackChannelLogoutUri:               c.BackChannelLogoutURI,
		RequirePushedAuthorizationRequests: c.RequirePAR,
		DpopBoundAccessTokens:              c.DPoPBound,
	}
	if c.LoginVersion == projects.LoginV1 {
		out.LoginVersion = &managementv1.LoginVersion{Version: &managementv1.LoginVersion_LoginV1{LoginV1: &managementv1.LoginV1{}}}
	}
	return out
}

// appToProto renders an app; secrets are never part of it.
func appToProto(a *projects.App) *managementv1.App {
	out := &managementv1.App{
		Id:          a.ID,
		Details:     readDetails(a.CreationDate, a.ChangeDate, a.Sequence, a.OrgID),
		State:       managementv1.AppState(a.State),
		Name:        a.Name,
		AdminClient: a.AdminClient,
	}
	switch {
	case a.OIDC != nil:
		out.Config = &managementv1.App_OidcConfig{OidcConfig: oidcConfigToProto(a.ClientID, a.OIDC)}
	case a.API != nil:
		out.Config = &managementv1.App_ApiConfig{ApiConfig: &managementv1.APIConfig{
			ClientId:       a.ClientID,
			AuthMethodType: appEnumToAPI(apiAuthMethods, a.API.AuthMethod),
		}}
	}
	return out
}

// GetAppByID returns an application of a project of the organization,
// without its secret.
func (s *Server) GetAppByID(ctx context.Context, req *managementv1.GetAppByIDRequest) (*managementv1.GetAppByIDResponse, error) {
	lim, err := apierr.CheckLimits(req) // the ids' maximum length is in the proto
	if err != nil {
		return nil, err
	}
	_, a, err := s.appByIDs(ctx, lim, req.GetProjectId(), req.GetAppId())
	if err != nil {
		return nil, err
	}
	return &managementv1.GetAppByIDResponse{App: appToProto(a)}, nil
}
