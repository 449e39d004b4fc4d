package apply

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
)

// orgState is what exists in one organization, in the documents' shape
// (create-request field names), by natural key.
type orgState struct {
	id       string
	projects map[string]*projectState             // name → project
	idps     map[string]map[string]any            // name → fields
	users    map[string]*userState                // userName → user
	members  map[string]map[string]any            // userName → {roles}
	metadata map[string]map[string]map[string]any // userName → key → {key, value}
}

type projectState struct {
	id     string
	fields map[string]any
	apps   map[string]*appState // name → app
}

type appState struct {
	id, kind string // kind: KindOIDCApp or KindAPIApp
	fields   map[string]any
}

type userState struct {
	id, kind string
	fields   map[string]any
}

type state struct {
	orgs map[string]*orgState // name → org; nil entry: known not to exist
}

func (s *state) orgID(name string) string {
	if o := s.orgs[name]; o != nil {
		return o.id
	}
	return ""
}

func (s *state) projectID(org, name string) string {
	if o := s.orgs[org]; o != nil {
		if p := o.projects[name]; p != nil {
			return p.id
		}
	}
	return ""
}

func (s *state) userID(org, userName string) string {
	if o := s.orgs[org]; o != nil {
		if u := o.users[userName]; u != nil {
			return u.id
		}
	}
	return ""
}

// current returns the existing object a document names, in its shape.
func (s *state) current(d *Doc) (map[string]any, bool) {
	if d.Kind == KindOrg {
		if o := s.orgs[str(d.Fields["name"])]; o != nil {
			return map[string]any{"name": d.Fields["name"]}, true
		}
		return nil, false
	}
	o := s.orgs[d.Org]
	if o == nil {
		return nil, false
	}
	name := str(d.Fields["name"])
	switch d.Kind {
	case KindProject:
		if p := o.projects[name]; p != nil {
			return p.fields, true
		}
	case KindOIDCApp, KindAPIApp:
		if p := o.projects[d.Project]; p != nil {
			if a := p.apps[name]; a != nil && a.kind == d.Kind {
				return a.fields, true
			} else if a != nil {
				return map[string]any{"name": name, "kind": a.kind}, true
			}
		}
	case KindHumanUser, KindMachineUser:
		if u := o.users[str(d.Fields["userName"])]; u != nil {
			if u.kind != d.Kind {
				return map[string]any{"userName": d.Fields["userName"], "kind": u.kind}, true
			}
			return u.fields, true
		}
	case KindOIDCIdP:
		if f := o.idps[name]; f != nil {
			return f, true
		}
	case KindUserMetadata:
		if m := o.metadata[d.UserName][str(d.Fields["key"])]; m != nil {
			return m, true
		}
	case KindOrgMember:
		if m := o.members[d.UserName]; m != nil {
			return m, true
		}
	}
	return nil, false
}

// asMap is a message's JSON form as Go values.
func asMap(m proto.Message) map[string]any {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return map[string]any{}
	}
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// merge copies the entries of src into dst.
func merge(dst map[string]any, src any) map[string]any {
	if m, ok := src.(map[string]any); ok {
		for k, v := range m {
			dst[k] = v
		}
	}
	return dst
}

// readState reads the organizations the documents name, and everything
// of each that documents of a kind refer to.
func (e *Engine) readState(ctx context.Context, docs []*Doc) (*state, error) {
	st := &state{orgs: map[string]*orgState{}}
	names := map[string]bool{}
	for _, d := range docs {
		if d.Kind == KindOrg {
			names[str(d.Fields["name"])] = true
		} else {
			names[d.Org] = true
		}
	}
	orgs, err := e.listOrgs(ctx)
	if err != nil {
		return nil, err
	}
	for n := range names {
		id, ok := orgs[n]
		if !ok {
			continue
		}
		o, err := e.readOrg(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read organization %s: %w", n, err)
		}
		st.orgs[n] = o
	}
	for _, d := range docs {
		if o := st.orgs[d.Org]; d.Kind == KindUserMetadata && o != nil {
			if err := e.readMetadata(ctx, o, d.UserName); err != nil {
				return nil, err
			}
		}
	}
	for n, o := range st.orgs {
		e.orgs[n] = o.id
		for pn, p := range o.projects {
			e.projects[key(n, pn)] = p.id
		}
		for un, u := range o.users {
			e.users[key(n, un)] = u.id
		}
	}
	return st, nil
}

// listOrgs maps every organization's name the caller can see to its id.
func (e *Engine) listOrgs(ctx context.Context) (map[string]string, error) {
	all, err := page(func(q *managementv1.ListQuery) ([]*managementv1.Org, uint64, error) {
		res, err := call(ctx, "", e.API.ListOrgs, &managementv1.ListOrgsRequest{Query: q})
		if err != nil {
			return nil, 0, fmt.Errorf("list organizations: %w", err)
		}
		return res.GetResult(), res.GetDetails().GetTotalResult(), nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range all {
		out[o.GetName()] = o.GetId()
	}
	return out, nil
}

func (e *Engine) readOrg(ctx context.Context, orgID string) (*orgState, error) {
	o := &orgState{id: orgID, projects: map[string]*projectState{}, idps: map[string]map[string]any{},
		users: map[string]*userState{}, members: map[string]map[string]any{}, metadata: map[string]map[string]map[string]any{}}

	projects, err := page(func(q *managementv1.ListQuery) ([]*managementv1.Project, uint64, error) {
		res, err := call(ctx, orgID, e.API.ListProjects, &managementv1.ListProjectsRequest{Query: q})
		return res.GetResult(), res.GetDetails().GetTotalResult(), err
	})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	for _, p := range projects {
		ps := &projectState{id: p.GetId(), fields: asMap(p), apps: map[string]*appState{}}
		apps, err := page(func(q *managementv1.ListQuery) ([]*managementv1.App, uint64, error) {
			res, err := call(ctx, orgID, e.API.ListApps, &managementv1.ListAppsRequest{ProjectId: p.GetId(), Query: q})
			return res.GetResult(), res.GetDetails().GetTotalResult(), err
		})
		if err != nil {
			return nil, fmt.Errorf("list the apps of project %s: %w", p.GetName(), err)
		}
		for _, a := range apps {
			as := &appState{id: a.GetId(), fields: map[string]any{"name": a.GetName()}}
			m := asMap(a)
			if a.GetOidcConfig() != nil {
				as.kind = KindOIDCApp
				merge(as.fields, m["oidcConfig"])
			} else {
				as.kind = KindAPIApp
				merge(as.fields, m["apiConfig"])
			}
			ps.apps[a.GetName()] = as
		}
		o.projects[p.GetName()] = ps
	}

	idps, err := page(func(q *managementv1.ListQuery) ([]*managementv1.IDP, uint64, error) {
		res, err := call(ctx, orgID, e.API.ListOrgIDPs, &managementv1.ListOrgIDPsRequest{Query: q})
		return res.GetResult(), res.GetDetails().GetTotalResult(), err
	})
	if err != nil {
		return nil, fmt.Errorf("list identity providers: %w", err)
	}
	for _, i := range idps {
		m := asMap(i)
		f := map[string]any{"name": i.GetName(), "id": i.GetId()}
		for _, k := range []string{"stylingType", "autoRegister"} {
			if v, ok := m[k]; ok {
				f[k] = v
			}
		}
		o.idps[i.GetName()] = merge(f, m["oidcConfig"])
	}

	users, err := page(func(q *managementv1.ListQuery) ([]*managementv1.User, uint64, error) {
		res, err := call(ctx, orgID, e.API.ListUsers, &managementv1.ListUsersRequest{Query: q})
		return res.GetResult(), res.GetDetails().GetTotalResult(), err
	})
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	byID := map[string]string{}
	for _, u := range users {
		m := asMap(u)
		us := &userState{id: u.GetId(), fields: map[string]any{"userName": u.GetUserName()}}
		if u.GetMachine() != nil {
			us.kind = KindMachineUser
			merge(us.fields, m["machine"])
		} else {
			us.kind = KindHumanUser
			merge(us.fields, m["human"])
		}
		o.users[u.GetUserName()] = us
		byID[u.GetId()] = u.GetUserName()
	}

	members, err := page(func(q *managementv1.ListQuery) ([]*managementv1.Member, uint64, error) {
		res, err := call(ctx, orgID, e.API.ListOrgMembers, &managementv1.ListOrgMembersRequest{Query: q})
		return res.GetResult(), res.GetDetails().GetTotalResult(), err
	})
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	for _, m := range members {
		// Members from other organizations have no natural key here.
		if n, ok := byID[m.GetUserId()]; ok {
			roles := make([]any, 0, len(m.GetRoles()))
			for _, r := range m.GetRoles() {
				roles = append(roles, r)
			}
			o.members[n] = map[string]any{"roles": roles}
		}
	}
	return o, nil
}

// readMetadata reads a user's metadata into the org state (on demand: it
// is one call per user).
func (e *Engine) readMetadata(ctx context.Context, o *orgState, userName string) error {
	u := o.users[userName]
	if u == nil || o.metadata[userName] != nil {
		return nil
	}
	list, err := page(func(q *managementv1.ListQuery) ([]*managementv1.Metadata, uint64, error) {
		res, err := call(ctx, o.id, e.API.ListUserMetadata, &managementv1.ListUserMetadataRequest{Id: u.id, Query: q})
		return res.GetResult(), res.GetDetails().GetTotalResult(), err
	})
	if err != nil {
		return fmt.Errorf("list the metadata of %s: %w", userName, err)
	}
	md := map[string]map[string]any{}
	for _, m := range list {
		f := asMap(m)
		md[m.GetKey()] = map[string]any{"key": f["key"], "value": f["value"]}
	}
	o.metadata[userName] = md
	return nil
}
