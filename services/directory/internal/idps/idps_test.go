package idps_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/idps"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
)

func TestIssuerProblem(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		ok     bool
	}{
		{"https://accounts.example.com", true},
		{"https://login.example.com/tenant/v2.0", true},
		{"https://example.com:8443/", true},
		{"HTTPS://example.com", true},
		{"http://localhost:8080", true},
		{"http://LOCALHOST", true},
		{"http://127.0.0.1:9000/realms/x", true},
		{"http://127.0.0.2", true},
		{"http://[::1]:8080", true},
		{"http://example.com", false},
		{"http://10.0.0.1", false},
		{"http://localhost.example.com", false},
		{"ftp://example.com", false},
		{"example.com", false},
		{"/relative/path", false},
		{"https://", false},
		{"https:///path", false},
		{"mailto:a@example.com", false},
		{"https://user:pw@example.com", false},
		{"https://example.com?tenant=1", false},
		{"https://example.com?", false},
		{"https://example.com#x", false},
		{"https://example.com#", false},
		{" https://example.com", false},
		{"https://example.com\n", false},
		{"https://exa mple.com", false},
	} {
		if got := idps.IssuerProblem(tc.issuer); (got == "") != tc.ok {
			t.Errorf("IssuerProblem(%q) = %q; want ok=%v", tc.issuer, got, tc.ok)
		}
	}
}

func TestScopeProblem(t *testing.T) {
	for s, ok := range map[string]bool{
		"openid": true, "profile": true, "https://graph.example.com/User.Read": true, "a:b!#$%&'()*+,-./": true,
		"": false, "two words": false, "tab\t": false, `quo"te`: false, `back\slash`: false, "größe": false,
	} {
		if got := idps.ScopeProblem(s); (got == "") != ok {
			t.Errorf("ScopeProblem(%q) = %q; want ok=%v", s, got, ok)
		}
	}
}

func TestTextMethodMatch(t *testing.T) {
	for _, tc := range []struct {
		m             textquery.Method
		stored, value string
		want          bool
	}{
		{textquery.Equals, "Acme SSO", "Acme SSO", true},
		{textquery.Equals, "Acme SSO", "acme sso", false},
		{textquery.EqualsIgnoreCase, "Acme SSO", "acme sso", true},
		{textquery.EqualsIgnoreCase, "Straße", "STRASSE", true},
		{textquery.StartsWith, "Acme SSO", "Acme", true},
		{textquery.StartsWith, "Acme SSO", "acme", false},
		{textquery.StartsWithIgnoreCase, "Acme SSO", "ACME", true},
		{textquery.Contains, "Acme SSO", "e S", true},
		{textquery.Contains, "Acme SSO", "E S", false},
		{textquery.ContainsIgnoreCase, "Ärzte Login", "ärzte", true},
		{textquery.EndsWith, "Acme SSO", "SSO", true},
		{textquery.EndsWith, "Acme SSO", "sso", false},
		{textquery.EndsWithIgnoreCase, "Acme SSO", "sso", true},
		{textquery.Method(8), "x", "x", false},
	} {
		if got := tc.m.Match(tc.stored, tc.value); got != tc.want {
			t.Errorf("method %d Match(%q, %q) = %v; want %v", tc.m, tc.stored, tc.value, got, tc.want)
		}
	}
	if textquery.Method(8).Valid() || textquery.Method(-1).Valid() || !textquery.EndsWithIgnoreCase.Valid() {
		t.Error("Valid accepts exactly the eight defined methods")
	}
}

func TestRequestScopes(t *testing.T) {
	p := &idps.IDP{Config: idps.Config{Scopes: idps.StringList{"email", "openid", "profile", "email"}}}
	if got := p.RequestScopes(); !slices.Equal(got, []string{"openid", "email", "profile"}) {
		t.Fatalf("RequestScopes = %v; want openid first, no duplicates", got)
	}
	if got := (&idps.IDP{}).RequestScopes(); !slices.Equal(got, []string{"openid"}) {
		t.Fatalf("RequestScopes without scopes = %v; want [openid]", got)
	}
}

type fixture struct {
	es    *eventstore.Store
	cmds  *idps.Commands
	q     *idps.Queries
	orgID string
}

func newFixture(t *testing.T, d db.Dialect) *fixture {
	t.Helper()
	st := storetest.Open(t, d)
	es := eventstore.New(st, nil)
	orgs.Register(es)
	idps.Register(es)
	c, err := secrets.NewCipher(bytes.Repeat([]byte{7}, 32), secrets.PurposeIdPSecrets)
	if err != nil {
		t.Fatal(err)
	}
	orgID, _, err := (&orgs.Commands{ES: es, IssuerHost: "localhost"}).AddOrg(context.Background(), "test", "Org", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{es: es, cmds: &idps.Commands{ES: es, Cipher: c}, q: &idps.Queries{DB: st}, orgID: orgID}
}

func newOIDC(name, secret string) idps.NewOIDC {
	return idps.NewOIDC{Name: name, ClientSecret: secret, Config: idps.Config{
		ClientID: "client-" + name, Issuer: "https://idp.example.com", Scopes: idps.StringList{"email"},
	}}
}

func TestCommands(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		const secret = "s3cr3t-value-of-the-idp"
		id, evs, err := f.cmds.AddOIDC(ctx, "editor", f.orgID, newOIDC("Acme", secret))
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Type != idps.EventOIDCAdded || evs[0].ResourceOwner != f.orgID || evs[0].AggregateType != idps.Aggregate {
			t.Fatalf("events = %+v", evs)
		}
		if bytes.Contains(evs[0].Payload, []byte(secret)) {
			t.Fatal("event payload holds the plaintext secret")
		}
		p, err := f.q.Get(ctx, f.orgID, id)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(p.EncryptedSecret, []byte(secret)) || len(p.EncryptedSecret) == 0 {
			t.Fatal("projection holds the plaintext secret (or none)")
		}
		sec := idps.Secrets{Cipher: f.cmds.Cipher}
		if got, err := sec.ClientSecret(ctx, p); err != nil || got != secret {
			t.Fatalf("ClientSecret = %q, %v; want the secret", got, err)
		}
		// The IdP id is bound to the ciphertext.
		moved := *p
		moved.ID = "another-idp"
		if _, err := sec.ClientSecret(ctx, &moved); !errors.Is(err, secrets.ErrDecrypt) {
			t.Fatalf("ciphertext under another id: %v; want ErrDecrypt", err)
		}
		if _, err := f.q.Get(ctx, "other-org", id); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("Get in another org: %v; want ErrNotFound", err)
		}

		// The name is unique in the organization.
		if _, _, err := f.cmds.AddOIDC(ctx, "editor", f.orgID, newOIDC("Acme", "x")); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("duplicate name: %v; want AlreadyExists", err)
		}

		// Update: same values with an empty or the same secret change nothing.
		for _, s := range []string{"", secret} {
			if _, err := f.cmds.UpdateOIDCConfig(ctx, "editor", p, p.Config, s); connect.CodeOf(err) != connect.CodeAborted {
				t.Fatalf("no-op update (secret %d chars): %v; want Aborted", len(s), err)
			}
		}
		evs, err = f.cmds.UpdateOIDCConfig(ctx, "editor", p, p.Config, "new-secret")
		if err != nil {
			t.Fatal(err)
		}
		p, _ = f.q.Get(ctx, f.orgID, id)
		if got, _ := sec.ClientSecret(ctx, p); got != "new-secret" || p.Version != 2 || p.Sequence != evs[0].Sequence {
			t.Fatalf("after secret change: secret %q, version %d, sequence %d", got, p.Version, p.Sequence)
		}
		// Replacing with an empty scope list and an empty secret keeps the secret.
		cfg := p.Config
		cfg.Scopes = nil
		if _, err := f.cmds.UpdateOIDCConfig(ctx, "editor", p, cfg, ""); err != nil {
			t.Fatal(err)
		}
		p, _ = f.q.Get(ctx, f.orgID, id)
		if got, _ := sec.ClientSecret(ctx, p); got != "new-secret" || len(p.Scopes) != 0 {
			t.Fatalf("after scope removal: secret %q, scopes %v", got, p.Scopes)
		}

		// The stored secret goes only to the provider it was set for: a new
		// issuer or client id needs the secret again, and nothing changes.
		for name, moved := range map[string]func(*idps.Config){
			"issuer":    func(c *idps.Config) { c.Issuer = "https://attacker.example" },
			"client id": func(c *idps.Config) { c.ClientID = "other-client" },
		} {
			cfg := p.Config
			moved(&cfg)
			if _, err := f.cmds.UpdateOIDCConfig(ctx, "editor", p, cfg, ""); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("new %s without the secret: %v; want InvalidArgument", name, err)
			}
			if again, _ := f.q.Get(ctx, f.orgID, id); again.Version != p.Version {
				t.Fatalf("new %s without the secret: the provider changed", name)
			}
			if _, err := f.cmds.UpdateOIDCConfig(ctx, "editor", p, cfg, "the-secret-for-it"); err != nil {
				t.Fatalf("new %s with its secret: %v", name, err)
			}
			p, _ = f.q.Get(ctx, f.orgID, id)
		}

		// A stale version is a concurrent change.
		stale := *p
		stale.Version--
		if _, err := f.cmds.Deactivate(ctx, "editor", &stale); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("stale deactivate: %v; want Aborted", err)
		}

		if _, err := f.cmds.Reactivate(ctx, "editor", p); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("reactivate active: %v; want Aborted", err)
		}
		if _, err := f.cmds.Deactivate(ctx, "editor", p); err != nil {
			t.Fatal(err)
		}
		p, _ = f.q.Get(ctx, f.orgID, id)
		if p.State != idps.StateInactive {
			t.Fatalf("state %d; want inactive", p.State)
		}
		if _, err := f.cmds.Deactivate(ctx, "editor", p); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("deactivate inactive: %v; want Aborted", err)
		}
		if _, err := f.cmds.Reactivate(ctx, "editor", p); err != nil {
			t.Fatal(err)
		}
		p, _ = f.q.Get(ctx, f.orgID, id)
		if _, err := f.cmds.Remove(ctx, "editor", p); err != nil {
			t.Fatal(err)
		}
		if _, err := f.q.Get(ctx, f.orgID, id); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("removed idp: %v; want ErrNotFound", err)
		}
		// A removed IdP's name is free again.
		if _, _, err := f.cmds.AddOIDC(ctx, "editor", f.orgID, newOIDC("Acme", "x")); err != nil {
			t.Fatalf("reuse of a removed IdP's name: %v", err)
		}
		seq, at, err := f.q.Processed(ctx)
		last, _ := f.es.Events(ctx, eventstore.Filter{})
		if err != nil || seq != last[len(last)-1].Sequence || !at.Equal(last[len(last)-1].CreatedAt) {
			t.Fatalf("Processed = %d %v %v; want the last event's", seq, at, err)
		}
	})
}

// Concurrent adds of one name: exactly one wins, the others are
// AlreadyExists (never two IdPs with one name).
func TestConcurrentAddsOfOneName(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		const n = 32
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, _, errs[i] = f.cmds.AddOIDC(ctx, "editor", f.orgID, newOIDC("Same", "x"))
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case connect.CodeOf(err) != connect.CodeAlreadyExists:
				t.Errorf("concurrent add: %v; want success or AlreadyExists", err)
			}
		}
		page, total, err := f.q.Search(ctx, f.orgID, idps.Search{})
		if ok != 1 || err != nil || total != 1 || len(page) != 1 {
			t.Fatalf("%d adds succeeded, %d IdPs stored (%v); want exactly 1", ok, total, err)
		}
	})
}

func TestSearch(t *testing.T) {
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		f := newFixture(t, d)
		ids := map[string]string{}
		for _, name := range []string{"beta", "Alpha", "alpha two", "Gamma"} {
			id, _, err := f.cmds.AddOIDC(ctx, "editor", f.orgID, newOIDC(name, "x"))
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = id
		}
		names := func(ps []*idps.IDP) string {
			out := make([]string, len(ps))
			for i, p := range ps {
				out[i] = p.Name
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			name  string
			s     idps.Search
			want  string
			total uint64
		}{
			{"default descending by name", idps.Search{}, "beta,alpha two,Gamma,Alpha", 4},
			{"ascending", idps.Search{Asc: true}, "Alpha,Gamma,alpha two,beta", 4},
			{"page", idps.Search{Asc: true, Offset: 1, Limit: 2}, "Gamma,alpha two", 4},
			{"offset past the end", idps.Search{Offset: 4}, "", 4},
			{"name ignoring case", idps.Search{Asc: true, Names: []idps.NameQuery{{Name: "ALPHA", Method: textquery.StartsWithIgnoreCase}}}, "Alpha,alpha two", 2},
			{"name exact", idps.Search{Names: []idps.NameQuery{{Name: "alpha", Method: textquery.Equals}}}, "", 0},
			{"id", idps.Search{IDs: []string{ids["Gamma"]}}, "Gamma", 1},
			{"two ids never both match", idps.Search{IDs: []string{ids["Gamma"], ids["beta"]}}, "", 0},
			{"owner org", idps.Search{OwnerTypes: []int32{idps.OwnerOrg}, Limit: 1}, "beta", 4},
			{"owner system", idps.Search{OwnerTypes: []int32{1}}, "", 0},
		} {
			page, total, err := f.q.Search(ctx, f.orgID, tc.s)
			if err != nil || names(page) != tc.want || total != tc.total {
				t.Errorf("%s: %q (total %d, %v); want %q (total %d)", tc.name, names(page), total, err, tc.want, tc.total)
			}
		}
		if page, total, _ := f.q.Search(ctx, "another-org", idps.Search{}); len(page) != 0 || total != 0 {
			t.Errorf("another org sees %d IdPs; want 0", total)
		}
	})
}
