package apply

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Export returns the organization's objects as documents Apply accepts
// (secrets and passwords aside, which the API never returns). Members
// from other organizations are left out: they have no natural key there.
func (e *Engine) Export(ctx context.Context, orgName string) ([]byte, error) {
	orgs, err := e.listOrgs(ctx)
	if err != nil {
		return nil, err
	}
	id, ok := orgs[orgName]
	if !ok {
		return nil, fmt.Errorf("no organization %q", orgName)
	}
	o, err := e.readOrg(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read organization %s: %w", orgName, err)
	}
	var docs []map[string]any
	add := func(kind string, fields map[string]any, extra map[string]any) error {
		c, err := canonical(kind, fields)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		for _, k := range writeOnly[kind] {
			delete(c, k)
		}
		for _, k := range idFields[kind] {
			delete(c, k)
		}
		c = escapeRefs(c).(map[string]any)
		c["kind"] = kind
		for k, v := range extra {
			c[k] = escapeRefs(v)
		}
		docs = append(docs, c)
		return nil
	}
	if err := add(KindOrg, map[string]any{"name": orgName}, nil); err != nil {
		return nil, err
	}
	org := map[string]any{"org": orgName}
	for _, n := range sortedKeys(o.projects) {
		if err := add(KindProject, o.projects[n].fields, org); err != nil {
			return nil, err
		}
	}
	for _, n := range sortedKeys(o.idps) {
		// The secret is never returned: the document names an environment
		// variable for it.
		if err := add(KindOIDCIdP, o.idps[n], map[string]any{"org": orgName}); err != nil {
			return nil, err
		}
		docs[len(docs)-1]["clientSecret"] = "${" + SecretEnv(orgName, n) + "}" // a reference, unescaped
	}
	userNames := sortedKeys(o.users)
	for _, kind := range []string{KindHumanUser, KindMachineUser} {
		for _, n := range userNames {
			if u := o.users[n]; u.kind == kind {
				if err := add(kind, u.fields, org); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, kind := range []string{KindOIDCApp, KindAPIApp} {
		for _, pn := range sortedKeys(o.projects) {
			p := o.projects[pn]
			for _, an := range sortedKeys(p.apps) {
				if a := p.apps[an]; a.kind == kind {
					if err := add(kind, a.fields, map[string]any{"org": orgName, "project": pn}); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	for _, n := range userNames {
		if err := e.readMetadata(ctx, o, n); err != nil {
			return nil, err
		}
		md := o.metadata[n]
		for _, k := range sortedKeys(md) {
			if err := add(KindUserMetadata, md[k], map[string]any{"org": orgName, "userName": n}); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range sortedKeys(o.members) {
		m := o.members[n]
		roles, _ := m["roles"].([]any)
		sorted := slices.Clone(roles)
		sort.Slice(sorted, func(i, j int) bool { return str(sorted[i]) < str(sorted[j]) })
		if err := add(KindOrgMember, map[string]any{"roles": sorted}, map[string]any{"org": orgName, "userName": n}); err != nil {
			return nil, err
		}
	}
	return encodeDocs(docs)
}

// SecretEnv is the environment variable an exported identity provider's
// client secret is read from: GATEHOUSE_IDP_SECRET_<ORG>_<NAME>, upper
// case, other characters as _.
func SecretEnv(org, idp string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z':
				return r - 'a' + 'A'
			case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
				return r
			}
			return '_'
		}, s)
	}
	return secretEnvPrefix + clean(org) + "_" + clean(idp)
}

const secretEnvPrefix = "GATEHOUSE_IDP_SECRET_"

// plainRef is ${NAME}, wherever it stands (also inside $${NAME}).
var plainRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// escapeRefs writes every ${NAME} in v's strings as $${NAME}, so that data read
// from the API (a description, a display name, a redirect URI) stays
// literal when the file is applied, instead of reading an environment
// variable of whoever applies it.
func escapeRefs(v any) any {
	switch x := v.(type) {
	case string:
		return plainRef.ReplaceAllStringFunc(x, func(ref string) string { return "$" + ref })
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = escapeRefs(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = escapeRefs(e)
		}
		return out
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// leading are the keys written first, in this order; the rest follow
// sorted.
var leading = []string{"kind", "org", "project", "userName", "name", "key"}

func encodeDocs(docs []map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		node := &yaml.Node{Kind: yaml.MappingNode}
		var keys []string
		for _, k := range leading {
			if _, ok := d[k]; ok {
				keys = append(keys, k)
			}
		}
		for _, k := range sortedKeys(d) {
			if !slices.Contains(leading, k) {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			var v yaml.Node
			if err := v.Encode(d[k]); err != nil {
				return nil, err
			}
			node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &v)
		}
		if err := enc.Encode(node); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
