package management

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// domainOrg checks a request's domain field and loads the target
// organization.
func (s *Server) domainOrg(ctx context.Context, req interface{ GetDomain() string }) (*orgs.Org, string, error) {
	domain := strings.TrimSpace(req.GetDomain())
	if domain == "" {
		return nil, "", apierr.InvalidArgument("ORG-domain-required", "domain is required")
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, "", err
	}
	return org, domain, nil
}

// AddOrgDomain adds an unverified domain.
func (s *Server) AddOrgDomain(ctx context.Context, req *managementv1.AddOrgDomainRequest) (*managementv1.AddOrgDomainResponse, error) {
	if _, err := apierr.CheckLimits(req); err != nil {
		return nil, err
	}
	org, domain, err := s.domainOrg(ctx, req)
	if err != nil {
		return nil, err
	}
	evs, err := s.OrgCmds.AddDomain(ctx, authz.FromContext(ctx).UserID, org, domain)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddOrgDomainResponse{Details: writeDetails(evs)}, nil
}

// GenerateOrgDomainValidation makes the token that proves the domain.
func (s *Server) GenerateOrgDomainValidation(ctx context.Context, req *managementv1.GenerateOrgDomainValidationRequest) (*managementv1.GenerateOrgDomainValidationResponse, error) {
	if _, err := apierr.CheckLimits(req); err != nil {
		return nil, err
	}
	org, domain, err := s.domainOrg(ctx, req)
	if err != nil {
		return nil, err
	}
	token, where, err := s.OrgCmds.GenerateDomainValidation(ctx, authz.FromContext(ctx).UserID, org, domain, int32(req.GetType()))
	if err != nil {
		return nil, err
	}
	return &managementv1.GenerateOrgDomainValidationResponse{Token: token, Url: where}, nil
}

// ValidateOrgDomain checks the token and verifies the domain.
func (s *Server) ValidateOrgDomain(ctx context.Context, req *managementv1.ValidateOrgDomainRequest) (*managementv1.ValidateOrgDomainResponse, error) {
	if _, err := apierr.CheckLimits(req); err != nil {
		return nil, err
	}
	org, domain, err := s.domainOrg(ctx, req)
	if err != nil {
		return nil, err
	}
	if s.DomainCheck == nil {
		return nil, fmt.Errorf("management: no domain checker configured")
	}
	evs, err := s.OrgCmds.ValidateDomain(ctx, authz.FromContext(ctx).UserID, org, domain, s.DomainCheck)
	if err != nil {
		return nil, err
	}
	return &managementv1.ValidateOrgDomainResponse{Details: writeDetails(evs)}, nil
}

// RemoveOrgDomain removes a domain other than the primary.
func (s *Server) RemoveOrgDomain(ctx context.Context, req *managementv1.RemoveOrgDomainRequest) (*managementv1.RemoveOrgDomainResponse, error) {
	if _, err := apierr.CheckLimits(req); err != nil {
		return nil, err
	}
	org, domain, err := s.domainOrg(ctx, req)
	if err != nil {
		return nil, err
	}
	evs, err := s.OrgCmds.RemoveDomain(ctx, authz.FromContext(ctx).UserID, org, domain)
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveOrgDomainResponse{Details: writeDetails(evs)}, nil
}

// SetPrimaryOrgDomain makes a verified domain the primary one.
func (s *Server) SetPrimaryOrgDomain(ctx context.Context, req *managementv1.SetPrimaryOrgDomainRequest) (*managementv1.SetPrimaryOrgDomainResponse, error) {
	if _, err := apierr.CheckLimits(req); err != nil {
		return nil, err
	}
	org, domain, err := s.domainOrg(ctx, req)
	if err != nil {
		return nil, err
	}
	evs, err := s.OrgCmds.SetPrimaryDomain(ctx, authz.FromContext(ctx).UserID, org, domain)
	if err != nil {
		return nil, err
	}
	return &managementv1.SetPrimaryOrgDomainResponse{Details: writeDetails(evs)}, nil
}

// ListOrgDomains lists the organization's domains.
func (s *Server) ListOrgDomains(ctx context.Context, req *managementv1.ListOrgDomainsRequest) (*managementv1.ListOrgDomainsResponse, error) {
	lim, err := apierr.CheckLimits(req)
	if err != nil {
		return nil, err
	}
	var f apierr.Fields
	page := usersPage(&f, lim, req.GetQuery())
	checkQueryCount(&f, lim)
	var c criteria[orgs.Domain]
	for i, q := range req.GetQueries() {
		field := fmt.Sprintf("queries[%d]", i)
		switch x := q.GetQuery().(type) {
		case *managementv1.DomainSearchQuery_DomainNameQuery:
			c.text(&f, lim, field+".domain_name_query", "name", x.DomainNameQuery.GetName(), x.DomainNameQuery.GetMethod(),
				func(d orgs.Domain) string { return d.Domain })
		default:
			f.Add(field, "must set exactly one query")
		}
	}
	lim.Rest(&f)
	if err := f.Err("ORG-invalid-query"); err != nil {
		return nil, err
	}
	org, err := s.org(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.Orgs.Domains(ctx, org.ID)
	if err != nil {
		return nil, err
	}
	list, total := c.page(all, func(a, b orgs.Domain) int { return strings.Compare(a.Domain, b.Domain) }, page)
	// Domains are events of the organization's aggregate.
	out := &managementv1.ListOrgDomainsResponse{
		Details: &managementv1.ListDetails{TotalResult: total, ProcessedSequence: org.Sequence, ViewTimestamp: timestamppb.New(org.ChangeDate)},
		Result:  make([]*managementv1.Domain, len(list)),
	}
	for i, d := range list {
		out.Result[i] = &managementv1.Domain{OrgId: d.OrgID, Details: readDetails(d.CreationDate, d.ChangeDate, d.Sequence, d.OrgID),
			DomainName: d.Domain, IsVerified: d.Verified, IsPrimary: d.Primary,
			ValidationType: managementv1.DomainValidationType(d.ValidationType)}
	}
	return out, nil
}
