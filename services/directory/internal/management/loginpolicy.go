package management

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// maxPolicyLifetime bounds the policy's durations (ZITADEL has no bound;
// a year is far beyond any sensible check lifetime).
const maxPolicyLifetime = 365 * 24 * time.Hour

// loginPolicyInput is the fields AddCustomLoginPolicyRequest and
// UpdateCustomLoginPolicyRequest share.
type loginPolicyInput interface {
	proto.Message
	GetAllowUsernamePassword() bool
	GetAllowRegister() bool
	GetAllowExternalIdp() bool
	GetForceMfa() bool
	GetPasswordlessType() managementv1.PasswordlessType
	GetHidePasswordReset() bool
	GetIgnoreUnknownUsernames() bool
	GetDefaultRedirectUri() string
	GetPasswordCheckLifetime() *durationpb.Duration
	GetExternalLoginCheckLifetime() *durationpb.Duration
	GetMfaInitSkipLifetime() *durationpb.Duration
	GetSecondFactorCheckLifetime() *durationpb.Duration
	GetMultiFactorCheckLifetime() *durationpb.Duration
	GetAllowDomainDiscovery() bool
	GetDisableLoginWithEmail() bool
	GetDisableLoginWithPhone() bool
	GetForceMfaLocalOnly() bool
	GetRequireVerifiedEmail() bool
}

// loginPolicy validates in and returns the policy; factors are those of
// AddCustomLoginPolicy (Update keeps the stored ones, as in ZITADEL, where
// factors have their own calls).
func loginPolicy(in loginPolicyInput, second []managementv1.SecondFactorType, multi []managementv1.MultiFactorType) (orgs.LoginPolicy, error) {
	lim, err := apierr.CheckLimits(in) // default_redirect_uri's maximum length is in the proto
	if err != nil {
		return orgs.LoginPolicy{}, err
	}
	var f apierr.Fields
	p := orgs.LoginPolicy{
		AllowUsernamePassword:  in.GetAllowUsernamePassword(),
		AllowRegister:          in.GetAllowRegister(),
		AllowExternalIDP:       in.GetAllowExternalIdp(),
		ForceMFA:               in.GetForceMfa(),
		ForceMFALocalOnly:      in.GetForceMfaLocalOnly(),
		PasswordlessType:       int32(in.GetPasswordlessType()),
		HidePasswordReset:      in.GetHidePasswordReset(),
		IgnoreUnknownUsernames: in.GetIgnoreUnknownUsernames(),
		DefaultRedirectURI:     in.GetDefaultRedirectUri(),
		AllowDomainDiscovery:   in.GetAllowDomainDiscovery(),
		DisableLoginWithEmail:  in.GetDisableLoginWithEmail(),
		DisableLoginWithPhone:  in.GetDisableLoginWithPhone(),
		RequireVerifiedEmail:   in.GetRequireVerifiedEmail(),
	}
	if _, ok := managementv1.PasswordlessType_name[p.PasswordlessType]; !ok {
		f.Add("passwordless_type", "must be a defined value")
	}
	if u := p.DefaultRedirectURI; u != "" {
		f.Check(lim.Length("default_redirect_uri", "default_redirect_uri", u, 0))
		if !webRedirect(u) {
			f.Add("default_redirect_uri", "must be an https URI (http only for a loopback host) with a host and without fragment")
		}
	}
	lifetime := func(name string, d *durationpb.Duration, def time.Duration) time.Duration {
		if d == nil {
			return def
		}
		v := d.AsDuration()
		if d.CheckValid() != nil || v < 0 || v > maxPolicyLifetime {
			f.Add(name, fmt.Sprintf("must be between 0 and %s", maxPolicyLifetime))
		}
		return v
	}
	def := orgs.DefaultLoginPolicy
	p.PasswordCheckLifetime = lifetime("password_check_lifetime", in.GetPasswordCheckLifetime(), def.PasswordCheckLifetime)
	p.ExternalLoginCheckLifetime = lifetime("external_login_check_lifetime", in.GetExternalLoginCheckLifetime(), def.ExternalLoginCheckLifetime)
	p.MFAInitSkipLifetime = lifetime("mfa_init_skip_lifetime", in.GetMfaInitSkipLifetime(), def.MFAInitSkipLifetime)
	p.SecondFactorCheckLifetime = lifetime("second_factor_check_lifetime", in.GetSecondFactorCheckLifetime(), def.SecondFactorCheckLifetime)
	p.MultiFactorCheckLifetime = lifetime("multi_factor_check_lifetime", in.GetMultiFactorCheckLifetime(), def.MultiFactorCheckLifetime)
	for i, s := range second {
		if _, ok := managementv1.SecondFactorType_name[int32(s)]; !ok || s == managementv1.SecondFactorType_SECOND_FACTOR_TYPE_UNSPECIFIED {
			f.Add(fmt.Sprintf("second_factors[%d]", i), "must be a defined factor")
		}
		p.SecondFactors = append(p.SecondFactors, int32(s))
	}
	for i, m := range multi {
		if _, ok := managementv1.MultiFactorType_name[int32(m)]; !ok || m == managementv1.MultiFactorType_MULTI_FACTOR_TYPE_UNSPECIFIED {
			f.Add(fmt.Sprintf("multi_factors[%d]", i), "must be a defined factor")
		}
		p.MultiFactors = append(p.MultiFactors, int32(m))
	}
	lim.Rest(&f)
	return p, f.Err("POLICY-login-invalid")
}

func loginPolicyToProto(p orgs.LoginPolicy, d *managementv1.ObjectDetails, isDefault bool) *managementv1.LoginPolicy {
	out := &managementv1.LoginPolicy{
		Details:                    d,
		AllowUsernamePassword:      p.AllowUsernamePassword,
		AllowRegister:              p.AllowRegister,
		AllowExternalIdp:           p.AllowExternalIDP,
		ForceMfa:                   p.ForceMFA,
		ForceMfaLocalOnly:          p.ForceMFALocalOnly,
		PasswordlessType:           managementv1.PasswordlessType(p.PasswordlessType),
		IsDefault:                  isDefault,
		HidePasswordReset:          p.HidePasswordReset,
		IgnoreUnknownUsernames:     p.IgnoreUnknownUsernames,
		DefaultRedirectUri:         p.DefaultRedirectURI,
		PasswordCheckLifetime:      durationpb.New(p.PasswordCheckLifetime),
		ExternalLoginCheckLifetime: durationpb.New(p.ExternalLoginCheckLifetime),
		MfaInitSkipLifetime:        durationpb.New(p.MFAInitSkipLifetime),
		SecondFactorCheckLifetime:  durationpb.New(p.SecondFactorCheckLifetime),
		MultiFactorCheckLifetime:   durationpb.New(p.MultiFactorCheckLifetime),
		AllowDomainDiscovery:       p.AllowDomainDiscovery,
		DisableLoginWithEmail:      p.DisableLoginWithEmail,
		DisableLoginWithPhone:      p.DisableLoginWithPhone,
		RequireVerifiedEmail:       p.RequireVerifiedEmail,
	}
	for _, s := range p.SecondFactors {
		out.SecondFactors = append(out.SecondFactors, managementv1.SecondFactorType(s))
	}
	for _, m := range p.MultiFactors {
		out.MultiFactors = append(out.MultiFactors, managementv1.MultiFactorType(m))
	}
	return out
}

// GetLoginPolicy returns the organization's own policy, or the default
// (is_default, details naming the organization without a history).
func (s *Server) GetLoginPolicy(ctx context.Context, _ *managementv1.GetLoginPolicyRequest) (*managementv1.GetLoginPolicyResponse, error) {
	org := authz.FromContext(ctx).OrgID
	own, err := s.Orgs.OwnLoginPolicy(ctx, org)
	if errors.Is(err, db.ErrNotFound) {
		return &managementv1.GetLoginPolicyResponse{IsDefault: true,
			Policy: loginPolicyToProto(orgs.DefaultLoginPolicy, &managementv1.ObjectDetails{ResourceOwner: orgs.InstanceID}, true)}, nil
	}
	if err != nil {
		return nil, err
	}
	d := readDetails(own.CreationDate, own.ChangeDate, own.Sequence, org)
	return &managementv1.GetLoginPolicyResponse{Policy: loginPolicyToProto(own.Policy, d, false)}, nil
}

// AddCustomLoginPolicy gives the organization a policy of its own.
func (s *Server) AddCustomLoginPolicy(ctx context.Context, req *managementv1.AddCustomLoginPolicyRequest) (*managementv1.AddCustomLoginPolicyResponse, error) {
	m := req
	p, err := loginPolicy(m, m.GetSecondFactors(), m.GetMultiFactors())
	if err == nil && len(m.GetIdps()) > 0 {
		err = apierr.InvalidArgument("POLICY-login-idps", "idps must be empty: the organization's identity providers apply")
	}
	if err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Orgs.OwnLoginPolicy(ctx, org.ID); err == nil {
		return nil, apierr.AlreadyExists("POLICY-login-exists", "the organization has a login policy; update it")
	} else if !errors.Is(err, db.ErrNotFound) {
		return nil, err
	}
	evs, err := s.OrgCmds.SetLoginPolicy(ctx, authz.FromContext(ctx).UserID, org, orgs.EventLoginPolicyAdded, p)
	if err != nil {
		return nil, apierr.FromStore(err, "login policy")
	}
	return &managementv1.AddCustomLoginPolicyResponse{Details: writeDetails(evs)}, nil
}

// UpdateCustomLoginPolicy replaces the organization's own policy; the
// second and multi factors stay.
func (s *Server) UpdateCustomLoginPolicy(ctx context.Context, req *managementv1.UpdateCustomLoginPolicyRequest) (*managementv1.UpdateCustomLoginPolicyResponse, error) {
	p, err := loginPolicy(req, nil, nil)
	if err != nil {
		return nil, err
	}
	org, own, err := s.ownLoginPolicy(ctx)
	if err != nil {
		return nil, err
	}
	p.SecondFactors, p.MultiFactors = own.Policy.SecondFactors, own.Policy.MultiFactors
	evs, err := s.OrgCmds.SetLoginPolicy(ctx, authz.FromContext(ctx).UserID, org, orgs.EventLoginPolicyChanged, p)
	if err != nil {
		return nil, apierr.FromStore(err, "login policy")
	}
	return &managementv1.UpdateCustomLoginPolicyResponse{Details: writeDetails(evs)}, nil
}

// ResetLoginPolicyToDefault removes the organization's own policy.
func (s *Server) ResetLoginPolicyToDefault(ctx context.Context, _ *managementv1.ResetLoginPolicyToDefaultRequest) (*managementv1.ResetLoginPolicyToDefaultResponse, error) {
	org, _, err := s.ownLoginPolicy(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := s.OrgCmds.SetLoginPolicy(ctx, authz.FromContext(ctx).UserID, org, orgs.EventLoginPolicyRemoved, orgs.LoginPolicy{})
	if err != nil {
		return nil, apierr.FromStore(err, "login policy")
	}
	return &managementv1.ResetLoginPolicyToDefaultResponse{Details: writeDetails(evs)}, nil
}

// ownLoginPolicy loads the organization and its own policy (NotFound
// without one).
func (s *Server) ownLoginPolicy(ctx context.Context) (*orgs.Org, *orgs.StoredLoginPolicy, error) {
	org, err := s.org(ctx)
	if err != nil {
		return nil, nil, err
	}
	own, err := s.Orgs.OwnLoginPolicy(ctx, org.ID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil, apierr.NotFound("POLICY-login-not-found", "the organization has no login policy of its own")
	}
	return org, own, err
}

// webRedirect reports whether raw is where a browser may be sent after a
// login: https, or http to a loopback host (a development machine), with a
// host, without a fragment, whitespace or control characters. Never
// javascript: or data:, which run in the page that follows the link.
func webRedirect(raw string) bool {
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 || strings.Contains(raw, "#") {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		ip := net.ParseIP(h)
		return h == "localhost" || ip != nil && ip.IsLoopback()
	}
	return false
}
