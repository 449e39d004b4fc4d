package management

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
)

// The login policy's factor lists, with ZITADEL's calls of their own
// (UpdateCustomLoginPolicy keeps them). authn reads the second factors:
// the factors a forced enrollment offers.

// policyFactors reads the policy in force (the organization's own or the
// default) and its list details.
func (s *Server) policyFactors(ctx context.Context) (orgs.LoginPolicy, *managementv1.ListDetails, error) {
	org := authz.FromContext(ctx).OrgID
	own, err := s.Orgs.OwnLoginPolicy(ctx, org)
	if errors.Is(err, db.ErrNotFound) {
		return orgs.DefaultLoginPolicy, &managementv1.ListDetails{}, nil
	}
	if err != nil {
		return orgs.LoginPolicy{}, nil, err
	}
	return own.Policy, &managementv1.ListDetails{TotalResult: 0, ProcessedSequence: own.Sequence, ViewTimestamp: timestamppb.New(own.ChangeDate)}, nil
}

// ListLoginPolicySecondFactors lists the policy's second factors.
func (s *Server) ListLoginPolicySecondFactors(ctx context.Context, _ *managementv1.ListLoginPolicySecondFactorsRequest) (*managementv1.ListLoginPolicySecondFactorsResponse, error) {
	p, d, err := s.policyFactors(ctx)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListLoginPolicySecondFactorsResponse{Details: d}
	for _, f := range p.SecondFactors {
		out.Result = append(out.Result, managementv1.SecondFactorType(f))
	}
	d.TotalResult = uint64(len(out.Result))
	return out, nil
}

// ListLoginPolicyMultiFactors lists the policy's multi factors.
func (s *Server) ListLoginPolicyMultiFactors(ctx context.Context, _ *managementv1.ListLoginPolicyMultiFactorsRequest) (*managementv1.ListLoginPolicyMultiFactorsResponse, error) {
	p, d, err := s.policyFactors(ctx)
	if err != nil {
		return nil, err
	}
	out := &managementv1.ListLoginPolicyMultiFactorsResponse{Details: d}
	for _, f := range p.MultiFactors {
		out.Result = append(out.Result, managementv1.MultiFactorType(f))
	}
	d.TotalResult = uint64(len(out.Result))
	return out, nil
}

// changeFactors adds (add) or removes factor t of a list of the
// organization's own policy (list picks it) and records the changed
// policy. An undefined factor is InvalidArgument; adding a listed one
// AlreadyExists; removing an unlisted one NotFound.
func (s *Server) changeFactors(ctx context.Context, t int32, defined bool, add bool, list func(*orgs.LoginPolicy) *[]int32) ([]eventstore.Event, error) {
	if !defined || t == 0 {
		return nil, apierr.InvalidArgument("POLICY-login-factor-invalid", "type must be a defined factor")
	}
	org, own, err := s.ownLoginPolicy(ctx)
	if err != nil {
		return nil, err
	}
	p := own.Policy
	l := list(&p)
	have := slices.Contains(*l, t)
	switch {
	case add && have:
		return nil, apierr.AlreadyExists("POLICY-login-factor-exists", "the login policy lists the factor already")
	case !add && !have:
		return nil, apierr.NotFound("POLICY-login-factor-not-found", "the login policy does not list the factor")
	case add:
		*l = append(slices.Clone(*l), t)
	default:
		*l = slices.DeleteFunc(slices.Clone(*l), func(v int32) bool { return v == t })
	}
	evs, err := s.OrgCmds.SetLoginPolicy(ctx, authz.FromContext(ctx).UserID, org, orgs.EventLoginPolicyChanged, p)
	return evs, apierr.FromStore(err, "login policy")
}

func secondFactors(p *orgs.LoginPolicy) *[]int32 { return &p.SecondFactors }
func multiFactors(p *orgs.LoginPolicy) *[]int32  { return &p.MultiFactors }

// AddSecondFactorToLoginPolicy adds a second factor to the policy.
func (s *Server) AddSecondFactorToLoginPolicy(ctx context.Context, req *managementv1.AddSecondFactorToLoginPolicyRequest) (*managementv1.AddSecondFactorToLoginPolicyResponse, error) {
	_, ok := managementv1.SecondFactorType_name[int32(req.GetType())]
	evs, err := s.changeFactors(ctx, int32(req.GetType()), ok, true, secondFactors)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddSecondFactorToLoginPolicyResponse{Details: writeDetails(evs)}, nil
}

// RemoveSecondFactorFromLoginPolicy removes a second factor from the
// policy.
func (s *Server) RemoveSecondFactorFromLoginPolicy(ctx context.Context, req *managementv1.RemoveSecondFactorFromLoginPolicyRequest) (*managementv1.RemoveSecondFactorFromLoginPolicyResponse, error) {
	_, ok := managementv1.SecondFactorType_name[int32(req.GetType())]
	evs, err := s.changeFactors(ctx, int32(req.GetType()), ok, false, secondFactors)
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveSecondFactorFromLoginPolicyResponse{Details: writeDetails(evs)}, nil
}

// AddMultiFactorToLoginPolicy adds a multi factor to the policy.
func (s *Server) AddMultiFactorToLoginPolicy(ctx context.Context, req *managementv1.AddMultiFactorToLoginPolicyRequest) (*managementv1.AddMultiFactorToLoginPolicyResponse, error) {
	_, ok := managementv1.MultiFactorType_name[int32(req.GetType())]
	evs, err := s.changeFactors(ctx, int32(req.GetType()), ok, true, multiFactors)
	if err != nil {
		return nil, err
	}
	return &managementv1.AddMultiFactorToLoginPolicyResponse{Details: writeDetails(evs)}, nil
}

// RemoveMultiFactorFromLoginPolicy removes a multi factor from the policy.
func (s *Server) RemoveMultiFactorFromLoginPolicy(ctx context.Context, req *managementv1.RemoveMultiFactorFromLoginPolicyRequest) (*managementv1.RemoveMultiFactorFromLoginPolicyResponse, error) {
	_, ok := managementv1.MultiFactorType_name[int32(req.GetType())]
	evs, err := s.changeFactors(ctx, int32(req.GetType()), ok, false, multiFactors)
	if err != nil {
		return nil, err
	}
	return &managementv1.RemoveMultiFactorFromLoginPolicyResponse{Details: writeDetails(evs)}, nil
}
