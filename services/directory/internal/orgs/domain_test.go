package orgs_test

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
)

// fakeCheck finds the tokens it was given, by domain.
type fakeCheck map[string]string

func (f fakeCheck) CheckHTTP(_ context.Context, domain, token string) error {
	if f[domain] != token {
		return errors.New("no file")
	}
	return nil
}

func (f fakeCheck) CheckDNS(ctx context.Context, domain, token string) error {
	return f.CheckHTTP(ctx, domain, token)
}

func TestNormalizeDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"Example.COM.": "example.com", "bücher.example": "xn--bcher-kva.example", " a-b.c ": "a-b.c"} {
		if got, err := orgs.NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "localhost", "1.2.3.4", "[::1]", "::1", "a..b", "-a.com", "a-.com", "a_b.com", "exa mple.com",
		"example.com:443", "http://example.com"} {
		if got, err := orgs.NormalizeDomain(in); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want InvalidArgument", in, got, err)
		}
	}
}

// An organization proves a domain once it put the generated token where
// it was told; a domain is one organization's; the primary cannot go,
// and only a verified domain becomes primary, changing the login names'
// domain.
func TestDomains(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		st := storetest.Open(t, d)
		es := eventstore.New(st, nil)
		projections.RegisterAll(es)
		c := &orgs.Commands{ES: es, IssuerHost: "id.example.com"}
		q := &orgs.Queries{DB: st}
		idA, _, err := c.AddOrg(ctx, "test", "Acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		idB, _, err := c.AddOrg(ctx, "test", "Bravo", nil)
		if err != nil {
			t.Fatal(err)
		}
		get := func(id string) *orgs.Org {
			o, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		// The generated primary domain is there, verified.
		if ds, err := q.Domains(ctx, idA); err != nil || len(ds) != 1 || ds[0].Domain != "acme.id.example.com" || !ds[0].Verified || !ds[0].Primary {
			t.Fatalf("domains of a new org: %+v, %v", ds, err)
		}
		for _, name := range []string{"id.example.com", "other.ID.example.com"} {
			if _, err := c.AddDomain(ctx, "test", get(idA), name); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("AddDomain(%s): %v; want InvalidArgument (the instance's)", name, err)
			}
		}
		if _, err := c.AddDomain(ctx, "test", get(idA), "Acme.Test"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AddDomain(ctx, "test", get(idA), "acme.test"); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("again: %v", err)
		}
		if _, _, err := c.GenerateDomainValidation(ctx, "test", get(idA), "acme.test", 0); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("no type: %v", err)
		}
		if _, err := c.ValidateDomain(ctx, "test", get(idA), "acme.test", fakeCheck{}); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("validate before generating: %v", err)
		}
		if _, err := c.SetPrimaryDomain(ctx, "test", get(idA), "acme.test"); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("an unverified primary: %v", err)
		}
		token, where, err := c.GenerateDomainValidation(ctx, "test", get(idA), "acme.test", orgs.ValidationDNS)
		if err != nil || len(token) < 20 || where != "_gatehouse-challenge.acme.test" {
			t.Fatalf("generate: %q %q %v", token, where, err)
		}
		if _, err := c.ValidateDomain(ctx, "test", get(idA), "acme.test", fakeCheck{"acme.test": "WRONG"}); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("a wrong token: %v", err)
		}
		if ok, _ := q.DomainVerified(ctx, idA, "acme.test"); ok {
			t.Fatal("verified without the token")
		}
		// Bravo adds the same domain meanwhile and gets its own token.
		if _, err := c.AddDomain(ctx, "test", get(idB), "acme.test"); err != nil {
			t.Fatal(err)
		}
		tokenB, _, err := c.GenerateDomainValidation(ctx, "test", get(idB), "acme.test", orgs.ValidationHTTP)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ValidateDomain(ctx, "test", get(idA), "acme.test", fakeCheck{"acme.test": token}); err != nil {
			t.Fatal(err)
		}
		if ok, err := q.DomainVerified(ctx, idA, "ACME.test"); !ok || err != nil {
			t.Fatalf("DomainVerified: %v, %v", ok, err)
		}
		if _, err := c.ValidateDomain(ctx, "test", get(idB), "acme.test", fakeCheck{"acme.test": tokenB}); connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Fatalf("a domain another organization verified: %v", err)
		}
		if ok, _ := q.DomainVerified(ctx, idB, "acme.test"); ok {
			t.Fatal("two organizations verified one domain")
		}
		// The primary domain.
		if _, err := c.RemoveDomain(ctx, "test", get(idA), "acme.id.example.com"); connect.CodeOf(err) != connect.CodeAborted {
			t.Fatalf("removing the primary: %v", err)
		}
		if _, err := c.SetPrimaryDomain(ctx, "test", get(idA), "acme.test"); err != nil {
			t.Fatal(err)
		}
		if o := get(idA); o.PrimaryDomain != "acme.test" {
			t.Fatalf("primary domain %q", o.PrimaryDomain)
		}
		if _, err := c.RemoveDomain(ctx, "test", get(idA), "acme.id.example.com"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RemoveDomain(ctx, "test", get(idA), "nothing.test"); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("removing an unknown domain: %v", err)
		}
		if ds, _ := q.Domains(ctx, idA); len(ds) != 1 || ds[0].Domain != "acme.test" || !ds[0].Primary {
			t.Fatalf("domains at the end: %+v", ds)
		}
	})
}
