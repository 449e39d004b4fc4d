package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// NeedsSecretsOut reports whether applying the plan creates an
// application that gets a client secret, which must be kept somewhere.
func (p *Plan) NeedsSecretsOut() bool {
	for _, s := range p.Steps {
		if s.Action != Create {
			continue
		}
		req, err := s.Doc.request()
		if err != nil {
			continue
		}
		switch r := req.(type) {
		case *managementv1.AddOIDCAppRequest:
			if m := r.GetAuthMethodType(); m == managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_BASIC || m == managementv1.OIDCAuthMethodType_OIDC_AUTH_METHOD_TYPE_POST {
				return true
			}
		case *managementv1.AddAPIAppRequest:
			if r.GetAuthMethodType() == managementv1.APIAuthMethodType_API_AUTH_METHOD_TYPE_BASIC {
				return true
			}
		}
	}
	return false
}

// Apply makes the plan's creates and updates, in order, and returns the
// secrets the API generated. It stops at the first error: what was done
// before it stays done, and a second Apply (after a new Plan) continues.
func (e *Engine) Apply(ctx context.Context, p *Plan) ([]Secret, error) {
	var secrets []Secret
	for _, s := range p.Steps {
		if s.Action == Unchanged {
			continue
		}
		sec, err := e.step(ctx, s)
		if err != nil {
			return secrets, &Error{Doc: s.Doc, Msg: fmt.Sprintf("%s failed: %v", s.Action, err)}
		}
		if sec != nil {
			secrets = append(secrets, *sec)
		}
	}
	return secrets, nil
}

func (e *Engine) step(ctx context.Context, s *Step) (*Secret, error) {
	d := s.Doc
	req, err := d.request()
	if err != nil {
		return nil, err
	}
	org := e.orgs[d.Org]
	if d.Kind != KindOrg && org == "" {
		return nil, fmt.Errorf("organization %s was not created", d.Org)
	}
	userID := func() (string, error) {
		id := e.users[key(d.Org, d.UserName)]
		if id == "" {
			return "", fmt.Errorf("user %s was not created", d.UserName)
		}
		return id, nil
	}
	projectID := func() (string, error) {
		id := e.projects[key(d.Org, d.Project)]
		if id == "" {
			return "", fmt.Errorf("project %s was not created", d.Project)
		}
		return id, nil
	}
	if s.Action == Update {
		return nil, e.update(ctx, s, org, userID)
	}
	switch r := req.(type) {
	case *managementv1.AddOrgRequest:
		res, err := call(ctx, "", e.API.AddOrg, r)
		if err != nil {
			return nil, err
		}
		e.orgs[r.GetName()] = res.GetId()
	case *managementv1.AddProjectRequest:
		res, err := call(ctx, org, e.API.AddProject, r)
		if err != nil {
			return nil, err
		}
		e.projects[key(d.Org, r.GetName())] = res.GetId()
	case *managementv1.AddOIDCAppRequest:
		if r.ProjectId, err = projectID(); err != nil {
			return nil, err
		}
		res, err := call(ctx, org, e.API.AddOIDCApp, r)
		if err != nil {
			return nil, err
		}
		if res.GetClientSecret() != "" {
			return &Secret{Kind: d.Kind, Org: d.Org, Project: d.Project, Name: r.GetName(), ClientID: res.GetClientId(), ClientSecret: res.GetClientSecret()}, nil
		}
	case *managementv1.AddAPIAppRequest:
		if r.ProjectId, err = projectID(); err != nil {
			return nil, err
		}
		res, err := call(ctx, org, e.API.AddAPIApp, r)
		if err != nil {
			return nil, err
		}
		if res.GetClientSecret() != "" {
			return &Secret{Kind: d.Kind, Org: d.Org, Project: d.Project, Name: r.GetName(), ClientID: res.GetClientId(), ClientSecret: res.GetClientSecret()}, nil
		}
	case *managementv1.AddHumanUserRequest:
		res, err := call(ctx, org, e.API.AddHumanUser, r)
		if err != nil {
			return nil, err
		}
		e.users[key(d.Org, r.GetUserName())] = res.GetUserId()
	case *managementv1.AddMachineUserRequest:
		res, err := call(ctx, org, e.API.AddMachineUser, r)
		if err != nil {
			return nil, err
		}
		e.users[key(d.Org, r.GetUserName())] = res.GetUserId()
	case *managementv1.AddOrgOIDCIDPRequest:
		//lint:ignore SA1019 the only RPC that adds an OIDC provider (deprecated in ZITADEL, kept by the interface).
		_, err = call(ctx, org, e.API.AddOrgOIDCIDP, r)
		return nil, err
	case *managementv1.SetUserMetadataRequest:
		if r.Id, err = userID(); err != nil {
			return nil, err
		}
		_, err = call(ctx, org, e.API.SetUserMetadata, r)
		return nil, err
	case *managementv1.AddOrgMemberRequest:
		if r.UserId, err = userID(); err != nil {
			return nil, err
		}
		_, err = call(ctx, org, e.API.AddOrgMember, r)
		return nil, err
	default:
		return nil, errors.New("no create for kind " + d.Kind)
	}
	return nil, nil
}

// overlay is the current object with the document's fields on top, as
// the update request msg (fields it lacks are dropped).
func overlay(cur, fields map[string]any, msg proto.Message) error {
	m := map[string]any{}
	merge(m, cur)
	merge(m, fields)
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(raw, msg)
}

func (e *Engine) update(ctx context.Context, s *Step, org string, userID func() (string, error)) error {
	d := s.Doc
	for _, k := range s.Changed {
		if !slices.Contains(updatable[d.Kind], k) {
			return fmt.Errorf("field %s cannot be changed", k)
		}
	}
	switch d.Kind {
	case KindOIDCApp:
		r := &managementv1.UpdateOIDCAppConfigRequest{}
		if err := overlay(s.cur, d.Fields, r); err != nil {
			return err
		}
		o := e.orgState(d.Org)
		r.ProjectId = o.projects[d.Project].id
		r.AppId = o.projects[d.Project].apps[str(d.Fields["name"])].id
		_, err := call(ctx, org, e.API.UpdateOIDCAppConfig, r)
		return err
	case KindOIDCIdP:
		r := &managementv1.UpdateOrgIDPOIDCConfigRequest{}
		if err := overlay(s.cur, d.Fields, r); err != nil {
			return err
		}
		r.IdpId = str(s.cur["id"])
		//lint:ignore SA1019 the only RPC that updates an OIDC provider (deprecated in ZITADEL, kept by the interface).
		_, err := call(ctx, org, e.API.UpdateOrgIDPOIDCConfig, r)
		return err
	case KindUserMetadata:
		r := &managementv1.SetUserMetadataRequest{}
		if err := overlay(nil, d.Fields, r); err != nil {
			return err
		}
		id, err := userID()
		if err != nil {
			return err
		}
		r.Id = id
		_, err = call(ctx, org, e.API.SetUserMetadata, r)
		return err
	case KindOrgMember:
		// No update RPC: replace the membership.
		id, err := userID()
		if err != nil {
			return err
		}
		if _, err := call(ctx, org, e.API.RemoveOrgMember, &managementv1.RemoveOrgMemberRequest{UserId: id}); err != nil {
			return err
		}
		r := &managementv1.AddOrgMemberRequest{}
		if err := overlay(nil, d.Fields, r); err != nil {
			return err
		}
		r.UserId = id
		_, err = call(ctx, org, e.API.AddOrgMember, r)
		return err
	}
	return fmt.Errorf("kind %s cannot be updated", d.Kind)
}
