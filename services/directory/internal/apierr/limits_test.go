package apierr_test

import (
	"strings"
	"testing"

	managementv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/management/v1"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// The limits come from management.proto's buf.validate rules alone: Length
// and Count report what protovalidate found, in Length's words, and Rest
// whatever no call asked about.
func TestLimitsFromTheProto(t *testing.T) {
	long := strings.Repeat
	check := func(m *managementv1.AddOrgOIDCIDPRequest) *apierr.Limits {
		t.Helper()
		l, err := apierr.CheckLimits(m)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	msg := func(e *apierr.LengthError) string {
		if e == nil {
			return ""
		}
		return e.Error()
	}

	l := check(&managementv1.AddOrgOIDCIDPRequest{Name: long("ä", 200), Scopes: make([]string, 20)})
	if got := msg(l.Length("name", "name", long("ä", 200), 1)); got != "" {
		t.Errorf("200 characters: %q; want none", got)
	}
	if got := msg(l.Count("scopes", "scopes")); got != "" {
		t.Errorf("20 scopes: %q; want none", got)
	}

	m := &managementv1.AddOrgOIDCIDPRequest{Name: long("ä", 201), ClientId: long("c", 201), Scopes: append(make([]string, 20), long("x", 201))}
	l = check(m)
	for _, c := range []struct{ got, want string }{
		{msg(l.Length("name", "name", m.Name, 1)), "name must have 1 to 200 characters"},
		{msg(l.Length("name", "name", "  ", 1)), "name is required"},
		{msg(l.Count("scopes", "scopes")), "scopes must have at most 20 entries"},
		{msg(l.Length("scopes", "scopes[20]", m.Scopes[20], 1)), "scopes must have 1 to 200 characters"},
		{msg(l.Length("scopes", "scopes[19]", "s", 1)), ""},
	} {
		if c.got != c.want {
			t.Errorf("%q; want %q", c.got, c.want)
		}
	}
	// client_id was not asked about: Rest reports it, once.
	var f apierr.Fields
	l.Rest(&f)
	l.Rest(&f)
	if len(f) != 1 || f[0].Field != "client_id" || !strings.Contains(f[0].Msg, "200") {
		t.Errorf("Rest: %v; want client_id's max_len alone", f)
	}
}
