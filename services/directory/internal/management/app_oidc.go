package management

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
)

// appOIDCRequest is what AddOIDCAppRequest and UpdateOIDCAppConfigRequest
// share: the complete OIDC configuration.
type appOIDCRequest interface {
	GetRedirectUris() []string
	GetResponseTypes() []managementv1.OIDCResponseType
	GetGrantTypes() []managementv1.OIDCGrantType
	GetAppType() managementv1.OIDCAppType
	GetAuthMethodType() managementv1.OIDCAuthMethodType
	GetPostLogoutRedirectUris() []string
	GetDevMode() bool
	GetAccessTokenType() managementv1.OIDCTokenType
	GetAccessTokenRoleAssertion() bool
	GetIdTokenRoleAssertion() bool
	GetIdTokenUserinfoAssertion() bool
	GetClockSkew() *durationpb.Duration
	GetAdditionalOrigins() []string
	GetSkipNativeAppSuccessPage() bool
	GetBackChannelLogoutUri() string
	GetLoginVersion() *managementv1.LoginVersion
	GetRequirePushedAuthorizationRequests() bool
	GetDpopBoundAccessTokens() bool
}

var (
	_ appOIDCRequest = (*managementv1.AddOIDCAppRequest)(nil)
	_ appOIDCRequest = (*managementv1.UpdateOIDCAppConfigRequest)(nil)
)

// appOIDCConfig maps and validates a request's configuration into a
// normalized one, adding every problem to f.
func appOIDCConfig(f *apierr.Fields, m appOIDCRequest) projects.OIDCConfig {
	c := projects.OIDCConfig{
		RedirectURIs:             m.GetRedirectUris(),
		AppType:                  appEnumToDomain(oidcAppTypes, m.GetAppType()),
		AuthMethod:               appEnumToDomain(oidcAuthMethods, m.GetAuthMethodType()),
		PostLogoutRedirectURIs:   m.GetPostLogoutRedirectUris(),
		DevMode:                  m.GetDevMode(),
		AccessTokenType:          appEnumToDomain(oidcTokenTypes, m.GetAccessTokenType()),
		AccessTokenRoleAssertion: m.GetAccessTokenRoleAssertion(),
		IDTokenRoleAssertion:     m.GetIdTokenRoleAssertion(),
		IDTokenUserinfoAssertion: m.GetIdTokenUserinfoAssertion(),
		AdditionalOrigins:        m.GetAdditionalOrigins(),
		SkipNativeAppSuccessPage: m.GetSkipNativeAppSuccessPage(),
		BackChannelLogoutURI:     m.GetBackChannelLogoutUri(),
		RequirePAR:               m.GetRequirePushedAuthorizationRequests(),
		DPoPBound:                m.GetDpopBoundAccessTokens(),
	}
	for _, rt := range m.GetResponseTypes() {
		c.ResponseTypes = append(c.ResponseTypes, appEnumToDomain(oidcResponseTypes, rt))
	}
	for _, g := range m.GetGrantTypes() {
		c.GrantTypes = append(c.GrantTypes, appEnumToDomain(oidcGrantTypes, g))
	}
	if skew := m.GetClockSkew(); skew != nil {
		if err := skew.CheckValid(); err != nil {
			f.Add("clock_skew", "is not a valid duration")
		} else {
			c.ClockSkew = skew.AsDuration()
		}
	}
	switch m.GetLoginVersion().GetVersion().(type) {
	case nil:
	case *managementv1.LoginVersion_LoginV1:
		c.LoginVersion = projects.LoginV1
	default:
		c.LoginVersion = "v2"
	}
	c.Normalize()
	c.Validate(f)
	return c
}

// oidcLimits checks the limits of an OIDC application's request (the
// proto's rules) on its URI lists as projects.OIDCConfig.Validate sees and
// reports them: without repeats (Normalize). So 50 distinct URIs and a
// repeat are within the 50 allowed, and a URI too long is reported once,
// at the index Validate names, as before the limits were rules.
func oidcLimits(m appOIDCRequest) (*apierr.Limits, error) {
	c := projects.OIDCConfig{RedirectURIs: m.GetRedirectUris(), PostLogoutRedirectURIs: m.GetPostLogoutRedirectUris(), AdditionalOrigins: m.GetAdditionalOrigins()}
	c.Normalize()
	switch r := m.(type) {
	case *managementv1.AddOIDCAppRequest:
		r = proto.CloneOf(r)
		r.RedirectUris, r.PostLogoutRedirectUris, r.AdditionalOrigins = c.RedirectURIs, c.PostLogoutRedirectURIs, c.AdditionalOrigins
		return apierr.CheckLimits(r)
	case *managementv1.UpdateOIDCAppConfigRequest:
		r = proto.CloneOf(r)
		r.RedirectUris, r.PostLogoutRedirectUris, r.AdditionalOrigins = c.RedirectURIs, c.PostLogoutRedirectURIs, c.AdditionalOrigins
		return apierr.CheckLimits(r)
	}
	return nil, fmt.Errorf("oidcLimits: %T", m)
}

// AddOIDCApp creates an OIDC application; the client secret (BASIC, POST)
// is in this response only.
func (s *Server) AddOIDCApp(ctx context.Context, req *managementv1.AddOIDCAppRequest) (*managementv1.AddOIDCAppResponse, error) {
	m := req
	lim, err := oidcLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	f.Check(lim.Length("project_id", "project_id", m.GetProjectId(), 1))
	f.Check(lim.Length("name", "name", m.GetName(), 1))
	if m.GetVersion() != managementv1.OIDCVersion_OIDC_VERSION_1_0 {
		f.Add("version", "must be OIDC_VERSION_1_0")
	}
	cfg := appOIDCConfig(&f, m)
	lim.ReportedIn(f, "redirect_uris", "post_logout_redirect_uris", "additional_origins") // projects.OIDCConfig.Validate words them; built-in apps use it too
	lim.Rest(&f)
	if err := f.Err("APP-invalid"); err != nil {
		return nil, err
	}
	p, err := s.project(ctx, m.GetProjectId())
	if err != nil {
		return nil, err
	}
	app, evs, err := s.projectCommands().AddOIDCApp(ctx, authz.FromContext(ctx).UserID, p, m.GetName(), cfg)
	if err != nil {
		return nil, err
	}
	problems := cfg.Compliance()
	return &managementv1.AddOIDCAppResponse{
		AppId:              app.ID,
		Details:            writeDetails(evs),
		ClientId:           app.ClientID,
		ClientSecret:       app.Secret,
		NoneCompliant:      len(problems) > 0,
		ComplianceProblems: complianceToProto(problems),
	}, nil
}

// UpdateOIDCAppConfig replaces an OIDC application's configuration.
func (s *Server) UpdateOIDCAppConfig(ctx context.Context, req *managementv1.UpdateOIDCAppConfigRequest) (*managementv1.UpdateOIDCAppConfigResponse, error) {
	m := req
	lim, err := oidcLimits(m) // the maximum lengths and counts are in the proto
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	checkAppIDs(&f, lim, m.GetProjectId(), m.GetAppId())
	cfg := appOIDCConfig(&f, m)
	lim.ReportedIn(f, "redirect_uris", "post_logout_redirect_uris", "additional_origins") // projects.OIDCConfig.Validate words them; built-in apps use it too
	lim.Rest(&f)
	if err := f.Err("APP-invalid"); err != nil {
		return nil, err
	}
	p, a, err := s.app(ctx, m.GetProjectId(), m.GetAppId())
	if err != nil {
		return nil, err
	}
	evs, err := s.projectCommands().ChangeOIDCConfig(ctx, authz.FromContext(ctx).UserID, p, a, cfg)
	if err != nil {
		return nil, err
	}
	return &managementv1.UpdateOIDCAppConfigResponse{Details: writeDetails(evs)}, nil
}

// RegenerateOIDCClientSecret replaces the client secret of an OIDC
// application using BASIC or POST; the new secret is in this response only.
func (s *Server) RegenerateOIDCClientSecret(ctx context.Context, req *managementv1.RegenerateOIDCClientSecretRequest) (*managementv1.RegenerateOIDCClientSecretResponse, error) {
	lim, err := apierr.CheckLimits(req) // the ids' maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, a, err := s.appByIDs(ctx, lim, req.GetProjectId(), req.GetAppId())
	if err != nil {
		return nil, err
	}
	secret, evs, err := s.projectCommands().RegenerateSecret(ctx, authz.FromContext(ctx).UserID, p, a)
	if err != nil {
		return nil, err
	}
	return &managementv1.RegenerateOIDCClientSecretResponse{ClientSecret: secret, Details: writeDetails(evs)}, nil
}

// SetAppAdminClient marks an application as an admin client, or unmarks it
// (IAM owners only, see Rules).
func (s *Server) SetAppAdminClient(ctx context.Context, req *managementv1.SetAppAdminClientRequest) (*managementv1.SetAppAdminClientResponse, error) {
	lim, err := apierr.CheckLimits(req) // the ids' maximum length is in the proto
	if err != nil {
		return nil, err
	}
	p, a, err := s.appByIDs(ctx, lim, req.GetProjectId(), req.GetAppId())
	if err != nil {
		return nil, err
	}
	secret, evs, err := s.projectCommands().SetAdminClient(ctx, authz.FromContext(ctx).UserID, p, a, req.GetAdminClient())
	if err != nil {
		return nil, err
	}
	return &managementv1.SetAppAdminClientResponse{Details: writeDetails(evs), ClientSecret: secret}, nil
}
