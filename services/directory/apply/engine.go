package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1/managementv1connect"
)

// OrgHeader selects the organization of a management call.
const OrgHeader = "x-service-orgid"

func newRequest(kind string) proto.Message {
	switch kind {
	case KindOrg:
		return &managementv1.AddOrgRequest{}
	case KindProject:
		return &managementv1.AddProjectRequest{}
	case KindOIDCApp:
		return &managementv1.AddOIDCAppRequest{}
	case KindAPIApp:
		return &managementv1.AddAPIAppRequest{}
	case KindHumanUser:
		return &managementv1.AddHumanUserRequest{}
	case KindMachineUser:
		return &managementv1.AddMachineUserRequest{}
	case KindOIDCIdP:
		return &managementv1.AddOrgOIDCIDPRequest{}
	case KindUserMetadata:
		return &managementv1.SetUserMetadataRequest{}
	case KindOrgMember:
		return &managementv1.AddOrgMemberRequest{}
	}
	panic("apply: unknown kind " + kind)
}

// writeOnly are fields the API takes but never returns: they are used
// when creating and never compared (nor exported).
var writeOnly = map[string][]string{
	KindHumanUser: {"initialPassword"},
	KindOIDCIdP:   {"clientSecret"},
}

// updatable are the fields an existing object's update RPC can change;
// a difference anywhere else cannot be applied.
var updatable = map[string][]string{
	KindOIDCApp: {"redirectUris", "responseTypes", "grantTypes", "appType", "authMethodType", "postLogoutRedirectUris",
		"devMode", "accessTokenType", "accessTokenRoleAssertion", "idTokenRoleAssertion", "idTokenUserinfoAssertion",
		"clockSkew", "additionalOrigins", "skipNativeAppSuccessPage", "backChannelLogoutUri", "loginVersion"},
	KindOIDCIdP:      {"clientId", "issuer", "scopes", "displayNameMapping", "usernameMapping"},
	KindUserMetadata: {"value"},
	KindOrgMember:    {"roles"},
}

// Action is what a plan does with one document.
type Action string

// Actions.
const (
	Create    Action = "create"
	Update    Action = "update"
	Unchanged Action = "unchanged"
)

// Step is one document's part of a plan.
type Step struct {
	Doc     *Doc
	Action  Action
	Changed []string // the fields an update changes
	cur     map[string]any
}

// Plan is what Apply would do.
type Plan struct {
	Steps []*Step
}

// Counts returns how many steps create, update and leave alone.
func (p *Plan) Counts() (create, update, unchanged int) {
	for _, s := range p.Steps {
		switch s.Action {
		case Create:
			create++
		case Update:
			update++
		default:
			unchanged++
		}
	}
	return
}

// Changes reports whether applying the plan changes anything.
func (p *Plan) Changes() bool {
	c, u, _ := p.Counts()
	return c+u > 0
}

// Secret is a credential created by Apply (a client secret), shown once.
type Secret struct {
	Kind         string `json:"kind"`
	Org          string `json:"org"`
	Project      string `json:"project"`
	Name         string `json:"name"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

// Engine plans and applies documents through the management API.
type Engine struct {
	API managementv1connect.ManagementServiceClient

	orgs     map[string]string // org name → id
	projects map[string]string // org/project → id
	users    map[string]string // org/userName → id
	st       *state
}

func (e *Engine) orgState(name string) *orgState { return e.st.orgs[name] }

func call[Req, Res any](ctx context.Context, orgID string, f func(context.Context, *Req) (*Res, error), req *Req) (*Res, error) {
	if orgID != "" {
		var call connect.CallInfo
		ctx, call = connect.NewClientContext(ctx)
		call.RequestHeader().Set(OrgHeader, orgID)
	}
	return f(ctx, req)
}

const pageSize = 1000

// page calls a list RPC until every result is read.
func page[T any](get func(q *managementv1.ListQuery) ([]T, uint64, error)) ([]T, error) {
	var all []T
	for off := uint64(0); ; off += pageSize {
		items, total, err := get(&managementv1.ListQuery{Offset: off, Limit: pageSize, Asc: true})
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if len(items) < pageSize || uint64(len(all)) >= total {
			return all, nil
		}
	}
}

func key(parts ...string) string { return strings.Join(parts, "/") }

// Plan reads the current state of everything the documents name and
// returns what Apply would do. It changes nothing; any document that
// cannot be applied (a duplicate, a missing reference, a change the API
// cannot make) is an error naming it.
func (e *Engine) Plan(ctx context.Context, docs []*Doc) (*Plan, error) {
	e.orgs, e.projects, e.users = map[string]string{}, map[string]string{}, map[string]string{}
	sorted := slices.Clone(docs)
	sort.SliceStable(sorted, func(i, j int) bool {
		return slices.Index(Kinds, sorted[i].Kind) < slices.Index(Kinds, sorted[j].Kind)
	})
	seen := map[string]*Doc{}
	declared := map[string]bool{} // kind/key of what the documents create
	for _, d := range sorted {
		id := d.Kind + " " + d.Name()
		if prev, ok := seen[id]; ok {
			return nil, &Error{Doc: d, Msg: "declared twice (also " + prev.Where() + ")"}
		}
		seen[id] = d
		declared[id] = true
	}
	st, err := e.readState(ctx, sorted)
	if err != nil {
		return nil, err
	}
	e.st = st
	plan := &Plan{}
	for _, d := range sorted {
		if err := checkRefs(d, declared, st); err != nil {
			return nil, err
		}
		s := &Step{Doc: d, Action: Create}
		cur, found := st.current(d)
		if k, ok := cur["kind"].(string); found && ok && k != d.Kind {
			return nil, &Error{Doc: d, Msg: "exists as a " + k}
		}
		if found {
			s.cur = cur
			want, err := canonical(d.Kind, d.Fields)
			if err != nil {
				return nil, &Error{Doc: d, Msg: err.Error()}
			}
			have, err := canonical(d.Kind, cur)
			if err != nil {
				return nil, &Error{Doc: d, Msg: "the current object: " + err.Error()}
			}
			for k := range d.Fields {
				if slices.Contains(writeOnly[d.Kind], k) {
					continue
				}
				if !equal(want[k], have[k]) {
					s.Changed = append(s.Changed, k)
				}
			}
			sort.Strings(s.Changed)
			s.Action = Unchanged
			if len(s.Changed) > 0 {
				s.Action = Update
				for _, k := range s.Changed {
					if !slices.Contains(updatable[d.Kind], k) {
						return nil, &Error{Doc: d, Field: k, Msg: fmt.Sprintf("differs from the current %s, and the management API cannot change it on an existing object (want %s, have %s)",
							d.Kind, show(want[k]), show(have[k]))}
					}
				}
			}
		}
		plan.Steps = append(plan.Steps, s)
	}
	return plan, nil
}

func show(v any) string {
	if v == nil {
		return "unset"
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func equal(a, b any) bool {
	if isZero(a) && isZero(b) {
		return true
	}
	if reflect.DeepEqual(a, b) {
		return true
	}
	// A nested object compares by the fields the document sets: the
	// server fills others (a display name made of first and last name).
	if am, ok := a.(map[string]any); ok {
		bm, _ := b.(map[string]any)
		for k, v := range am {
			if !equal(v, bm[k]) {
				return false
			}
		}
		return true
	}
	// Unordered lists (roles, scopes) compare as sets.
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if !aok || !bok || len(as) != len(bs) {
		return false
	}
	sa, sb := make([]string, len(as)), make([]string, len(bs))
	for i := range as {
		sa[i], sb[i] = fmt.Sprint(as[i]), fmt.Sprint(bs[i])
	}
	sort.Strings(sa)
	sort.Strings(sb)
	return slices.Equal(sa, sb)
}

// canonical passes fields through the kind's create request, so that
// both sides of a comparison have the same form (enum names, durations,
// defaults left out). Fields the request does not have are dropped.
func canonical(kind string, fields map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	req := newRequest(kind)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, req); err != nil {
		return nil, errors.New(cleanProtoErr(err))
	}
	out, err := protojson.Marshal(req)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func checkRefs(d *Doc, declared map[string]bool, st *state) error {
	if d.Org != "" && !declared[KindOrg+" "+d.Org] && st.orgID(d.Org) == "" {
		return &Error{Doc: d, Field: "org", Msg: fmt.Sprintf("no organization %q (declare it with kind Org)", d.Org)}
	}
	switch d.Kind {
	case KindOIDCApp, KindAPIApp:
		if !declared[KindProject+" "+key(d.Org, d.Project)] && st.projectID(d.Org, d.Project) == "" {
			return &Error{Doc: d, Field: "project", Msg: fmt.Sprintf("no project %q in %s (declare it with kind Project)", d.Project, d.Org)}
		}
	case KindUserMetadata, KindOrgMember:
		if !declared[KindHumanUser+" "+key(d.Org, d.UserName)] && !declared[KindMachineUser+" "+key(d.Org, d.UserName)] && st.userID(d.Org, d.UserName) == "" {
			return &Error{Doc: d, Field: "userName", Msg: fmt.Sprintf("no user %q in %s (declare it with kind HumanUser or MachineUser)", d.UserName, d.Org)}
		}
	}
	return nil
}
