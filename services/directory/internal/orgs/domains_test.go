package orgs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/storetest"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/textquery"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
)

// fakeCheck finds the tokens it holds, by domain, and records its calls
// ("http acme.test", "dns acme.test").
type fakeCheck struct {
	mu     sync.Mutex
	tokens map[string]string
	calls  []string
}

func newFakeCheck(tokens map[string]string) *fakeCheck { return &fakeCheck{tokens: tokens} }

func (f *fakeCheck) check(kind, domain, token string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, kind+" "+domain)
	if f.tokens[domain] != token {
		return errors.New("it holds something else")
	}
	return nil
}

func (f *fakeCheck) CheckHTTP(_ context.Context, domain, token string) error {
	return f.check("http", domain, token)
}

func (f *fakeCheck) CheckDNS(_ context.Context, domain, token string) error {
	return f.check("dns", domain, token)
}

func (f *fakeCheck) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

var _ orgs.Checker = (*fakeCheck)(nil)

const issuerHost = "id.example.com"

// domainFixture is a fresh store of dialect d with the directory's reducers.
type domainFixture struct {
	st *db.DB
	es *eventstore.Store
	c  *orgs.Commands
	q  *orgs.Queries
}

func newDomainFixture(t *testing.T, d db.Dialect) *domainFixture {
	t.Helper()
	st := storetest.Open(t, d)
	es := eventstore.New(st, nil)
	projections.RegisterAll(es)
	return &domainFixture{st: st, es: es, c: &orgs.Commands{ES: es, IssuerHost: issuerHost}, q: &orgs.Queries{DB: st}}
}

func (f *domainFixture) addOrg(t *testing.T, name string) string {
	t.Helper()
	id, _, err := f.c.AddOrg(context.Background(), "test", name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// org reads the organization now (its current version).
func (f *domainFixture) org(t *testing.T, id string) *orgs.Org {
	t.Helper()
	o, err := f.q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (f *domainFixture) domain(t *testing.T, orgID, name string) *orgs.Domain {
	t.Helper()
	ds, err := f.q.ListDomains(context.Background(), orgID, name, textquery.Equals)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 {
		return nil
	}
	return &ds[0]
}

// generate adds name to org and generates a validation of typ.
func (f *domainFixture) generate(t *testing.T, orgID, name string, typ int32) string {
	t.Helper()
	ctx := context.Background()
	if _, err := f.c.AddDomain(ctx, "test", f.org(t, orgID), name); err != nil {
		t.Fatal(err)
	}
	token, _, err := f.c.GenerateDomainValidation(ctx, "test", f.org(t, orgID), name, typ)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// verify adds name to org and validates it.
func (f *domainFixture) verify(t *testing.T, orgID, name string) {
	t.Helper()
	token := f.generate(t, orgID, name, orgs.ValidationDNS)
	if _, err := f.c.ValidateDomain(context.Background(), "test", f.org(t, orgID), name, newFakeCheck(map[string]string{name: token})); err != nil {
		t.Fatal(err)
	}
}

// lastEvent is the newest event of org.
func (f *domainFixture) lastEvent(t *testing.T, orgID string) eventstore.Event {
	t.Helper()
	evs, err := f.es.Events(context.Background(), eventstore.Filter{AggregateID: orgID})
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %v, %v", orgID, evs, err)
	}
	return evs[len(evs)-1]
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Errorf("%s: got %v; want %v", what, err, code)
	}
}

func TestNormalizeDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Example.COM.":                           "example.com",
		" a-b.c ":                                "a-b.c",
		"bücher.example":                         "xn--bcher-kva.example",
		"BÜCHER.Example":                         "xn--bcher-kva.example",
		"xn--bcher-kva.example":                  "xn--bcher-kva.example",
		"a1.b2.example":                          "a1.b2.example",
		"x.com1":                                 "x.com1",
		strings.Repeat("a", 63) + ".com":         strings.Repeat("a", 63) + ".com",
		strings.Repeat("abcdefghi.", 25) + "com": strings.Repeat("abcdefghi.", 25) + "com", // 253
	} {
		if got, err := orgs.NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", ".", "com", "localhost", "example.com..", ".example.com", "a..b",
		"1.2.3.4", "127.1", "example.123", "[::1]", "::1", "[2001:db8::1]",
		"-a.com", "a-.com", "a_b.com", "exa mple.com", "*.example.com", "example.com:443", "http://example.com",
		"example.com/x", "user@example.com", strings.Repeat("a", 64) + ".com",
		strings.Repeat("abcdefghi.", 25) + "comx", // 254
		strings.Repeat("a", 5000),
	} {
		if got, err := orgs.NormalizeDomain(in); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want InvalidArgument", in, got, err)
		}
	}
}

// The reducer of org.added records the generated primary domain, verified
// and primary: the instance's name.
func TestOrgAddedPrimaryDomain(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		o := f.org(t, id)
		ds, err := f.q.Domains(ctx, id)
		if err != nil || len(ds) != 1 {
			t.Fatalf("domains of a new org: %+v, %v", ds, err)
		}
		want := orgs.Domain{OrgID: id, Domain: "acme." + issuerHost, Verified: true, Primary: true,
			CreationDate: o.CreationDate, ChangeDate: o.CreationDate, Sequence: o.Sequence}
		got := ds[0]
		if !got.CreationDate.Equal(want.CreationDate) || !got.ChangeDate.Equal(want.ChangeDate) {
			t.Errorf("dates %v, %v; want %v", got.CreationDate, got.ChangeDate, want.CreationDate)
		}
		got.CreationDate, got.ChangeDate = want.CreationDate, want.ChangeDate
		if got != want {
			t.Errorf("got %+v; want %+v", got, want)
		}
		if o.PrimaryDomain != want.Domain {
			t.Errorf("orgs.primary_domain %q; want %q", o.PrimaryDomain, want.Domain)
		}
		// DomainVerified compares as names are stored.
		for name, ok := range map[string]bool{"acme.id.example.com": true, "ACME.ID.Example.COM": true, "acme.id.example.com.": true,
			"other.id.example.com": false, "": false, "not a domain": false} {
			if got, err := f.q.DomainVerified(ctx, id, name); got != ok || err != nil {
				t.Errorf("DomainVerified(%q) = %v, %v; want %v", name, got, err, ok)
			}
		}
		if ok, err := f.q.DomainVerified(ctx, f.addOrg(t, "Bravo"), "acme.id.example.com"); ok || err != nil {
			t.Errorf("another organization's domain: %v, %v", ok, err)
		}
		// On an issuer named by an IP address the generated domain is no
		// DNS name (its last label is a number), yet it is the
		// organization's, verified.
		ipc := &orgs.Commands{ES: f.es, IssuerHost: "127.0.0.1"}
		ipOrg, _, err := ipc.AddOrg(ctx, "test", "Loopback", nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.q.DomainVerified(ctx, ipOrg, "Loopback.127.0.0.1"); !ok || err != nil {
			t.Errorf("the generated domain under an IP issuer: %v, %v; want verified", ok, err)
		}
		o, err = f.q.Get(ctx, ipOrg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ipc.RemoveDomain(ctx, "test", o, "loopback.127.0.0.1"); connect.CodeOf(err) != connect.CodeAborted {
			t.Errorf("removing the generated primary under an IP issuer: %v; want Aborted (the primary), not InvalidArgument", err)
		}
	})
}

func TestAddDomain(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		evs, err := f.c.AddDomain(ctx, "editor-1", f.org(t, id), " Acme.Test. ")
		if err != nil {
			t.Fatal(err)
		}
		e := evs[0]
		if len(evs) != 1 || e.Type != orgs.EventDomainAdded || e.AggregateType != orgs.AggregateOrg || e.AggregateID != id ||
			e.ResourceOwner != id || e.Editor != "editor-1" || string(e.Payload) != `{"domain":"acme.test"}` {
			t.Errorf("event %+v (payload %s)", e, e.Payload)
		}
		dom := f.domain(t, id, "acme.test")
		if dom == nil || dom.Verified || dom.Primary || dom.ValidationType != 0 || dom.Sequence != e.Sequence {
			t.Errorf("added: %+v", dom)
		}
		if o := f.org(t, id); o.Sequence != e.Sequence || o.Version != e.Version {
			t.Errorf("org not touched: sequence %d version %d; want %d %d", o.Sequence, o.Version, e.Sequence, e.Version)
		}
		_, err = f.c.AddDomain(ctx, "test", f.org(t, id), "ACME.test")
		wantCode(t, "adding it again", err, connect.CodeAlreadyExists)
		for _, name := range []string{"id.example.com", "ID.Example.com.", "other.id.example.com", "a.b.id.example.com"} {
			_, err := f.c.AddDomain(ctx, "test", f.org(t, id), name)
			wantCode(t, "AddDomain("+name+") (the instance's)", err, connect.CodeInvalidArgument)
		}
		for _, name := range []string{"", "1.2.3.4", "acme.test:80", "localhost", "*.acme.test"} {
			_, err := f.c.AddDomain(ctx, "test", f.org(t, id), name)
			wantCode(t, "AddDomain("+name+")", err, connect.CodeInvalidArgument)
		}
		// Names that merely end like the issuer's host are fine.
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, id), "notid.example.com"); err != nil {
			t.Errorf("notid.example.com: %v", err)
		}
		// An organization read before a change is stale.
		stale := f.org(t, id)
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, id), "one.test"); err != nil {
			t.Fatal(err)
		}
		_, err = f.c.AddDomain(ctx, "test", stale, "two.test")
		wantCode(t, "a stale organization", err, connect.CodeAborted)
		// A domain another organization verified can be added (never verified).
		f.verify(t, id, "verified.test")
		other := f.addOrg(t, "Bravo")
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, other), "Verified.test"); err != nil {
			t.Errorf("a domain another organization verified: %v; want added", err)
		}
	})
}

func TestGenerateDomainValidation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, id), "acme.test"); err != nil {
			t.Fatal(err)
		}
		for _, typ := range []int32{0, 3, -1} {
			_, _, err := f.c.GenerateDomainValidation(ctx, "test", f.org(t, id), "acme.test", typ)
			wantCode(t, "an undefined type", err, connect.CodeInvalidArgument)
		}
		_, _, err := f.c.GenerateDomainValidation(ctx, "test", f.org(t, id), "nothing.test", orgs.ValidationHTTP)
		wantCode(t, "a domain the org lacks", err, connect.CodeNotFound)
		_, _, err = f.c.GenerateDomainValidation(ctx, "test", f.org(t, id), "acme.id.example.com", orgs.ValidationHTTP)
		wantCode(t, "a verified domain", err, connect.CodeAborted)

		token, where, err := f.c.GenerateDomainValidation(ctx, "test", f.org(t, id), "ACME.test", orgs.ValidationHTTP)
		if err != nil || len(token) < 20 || where != "http://acme.test/.well-known/gatehouse-challenge/"+token {
			t.Fatalf("HTTP: %q, %q, %v", token, where, err)
		}
		e := f.lastEvent(t, id)
		var p map[string]any
		if err := json.Unmarshal(e.Payload, &p); err != nil || e.Type != orgs.EventDomainVerificationAdded ||
			p["domain"] != "acme.test" || p["validationType"] != float64(orgs.ValidationHTTP) || p["validationCode"] != token {
			t.Errorf("event %s %s", e.Type, e.Payload)
		}
		if dom := f.domain(t, id, "acme.test"); dom.ValidationType != orgs.ValidationHTTP || dom.Verified || dom.Sequence != e.Sequence {
			t.Errorf("after HTTP: %+v", dom)
		}
		token2, where, err := f.c.GenerateDomainValidation(ctx, "test", f.org(t, id), "acme.test", orgs.ValidationDNS)
		if err != nil || token2 == token || where != "_gatehouse-challenge.acme.test" {
			t.Fatalf("DNS: %q, %q, %v", token2, where, err)
		}
		if dom := f.domain(t, id, "acme.test"); dom.ValidationType != orgs.ValidationDNS {
			t.Errorf("after DNS: %+v", dom)
		}
		// The newer token replaced the older one.
		check := newFakeCheck(map[string]string{"acme.test": token})
		_, err = f.c.ValidateDomain(ctx, "test", f.org(t, id), "acme.test", check)
		wantCode(t, "the replaced token", err, connect.CodeAborted)
		if got := check.Calls(); len(got) != 1 || got[0] != "dns acme.test" {
			t.Errorf("checks %v; want [dns acme.test]", got)
		}
	})
}

func TestValidateDomain(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, id), "acme.test"); err != nil {
			t.Fatal(err)
		}
		check := newFakeCheck(nil)
		_, err := f.c.ValidateDomain(ctx, "test", f.org(t, id), "acme.test", check)
		wantCode(t, "before a validation", err, connect.CodeAborted)
		_, err = f.c.ValidateDomain(ctx, "test", f.org(t, id), "nothing.test", check)
		wantCode(t, "a domain the org lacks", err, connect.CodeNotFound)
		_, err = f.c.ValidateDomain(ctx, "test", f.org(t, id), "acme.id.example.com", check)
		wantCode(t, "a verified domain", err, connect.CodeAborted)
		if len(check.Calls()) != 0 {
			t.Fatalf("checked without a validation: %v", check.Calls())
		}

		token, where, err := f.c.GenerateDomainValidation(ctx, "test", f.org(t, id), "acme.test", orgs.ValidationHTTP)
		if err != nil {
			t.Fatal(err)
		}
		// The file is not there: recorded, still unverified, and the
		// error says what was looked for.
		check = newFakeCheck(map[string]string{"acme.test": "OTHER"})
		_, err = f.c.ValidateDomain(ctx, "test", f.org(t, id), "acme.test", check)
		wantCode(t, "a wrong token", err, connect.CodeAborted)
		var ce *connect.Error
		if !errors.As(err, &ce) || !strings.Contains(ce.Message(), where) || !strings.Contains(ce.Message(), "it holds something else") {
			t.Errorf("message %q; want it to name %s and the checker's finding", err, where)
		}
		if e := f.lastEvent(t, id); e.Type != orgs.EventDomainVerificationFailed || string(e.Payload) != `{"domain":"acme.test"}` {
			t.Errorf("last event %s %s; want %s", e.Type, e.Payload, orgs.EventDomainVerificationFailed)
		}
		if dom := f.domain(t, id, "acme.test"); dom.Verified || dom.ValidationType != orgs.ValidationHTTP {
			t.Errorf("after a failure: %+v", dom)
		}
		if ok, _ := f.q.DomainVerified(ctx, id, "acme.test"); ok {
			t.Fatal("verified without the token")
		}
		// The same validation, retried once the file is there.
		check = newFakeCheck(map[string]string{"acme.test": token})
		evs, err := f.c.ValidateDomain(ctx, "test", f.org(t, id), "acme.test", check)
		if err != nil || len(evs) != 1 || evs[0].Type != orgs.EventDomainVerified {
			t.Fatalf("validate: %v, %v", evs, err)
		}
		if got := check.Calls(); len(got) != 1 || got[0] != "http acme.test" {
			t.Errorf("checks %v; want [http acme.test]", got)
		}
		if dom := f.domain(t, id, "acme.test"); !dom.Verified || dom.Primary || dom.Sequence != evs[0].Sequence {
			t.Errorf("after validating: %+v", dom)
		}
		if ok, err := f.q.DomainVerified(ctx, id, "Acme.TEST"); !ok || err != nil {
			t.Errorf("DomainVerified: %v, %v", ok, err)
		}
		_, err = f.c.ValidateDomain(ctx, "test", f.org(t, id), "acme.test", check)
		wantCode(t, "validating again", err, connect.CodeAborted)

		// A caller gone during the check records nothing.
		f.generate(t, id, "gone.test", orgs.ValidationDNS)
		cctx, cancel := context.WithCancel(ctx)
		before := f.lastEvent(t, id).Sequence
		_, err = f.c.ValidateDomain(cctx, "test", f.org(t, id), "gone.test", cancelling{cancel})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled check: %v; want context.Canceled", err)
		}
		if after := f.lastEvent(t, id).Sequence; after != before {
			t.Errorf("a cancelled check recorded an event")
		}
	})
}

// cancelling ends the caller's context during the check.
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) CheckHTTP(ctx context.Context, _, _ string) error { c.cancel(); return ctx.Err() }
func (c cancelling) CheckDNS(ctx context.Context, _, _ string) error  { c.cancel(); return ctx.Err() }

// A domain is verified by one organization: another can add it and
// generate a validation but never validate it, whether the first verified
// it before or at the same time.
func TestDomainVerifiedByOneOrg(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		a, b := f.addOrg(t, "Acme"), f.addOrg(t, "Bravo")
		tokenB := f.generate(t, b, "shared.test", orgs.ValidationHTTP)
		f.verify(t, a, "shared.test")
		before := f.lastEvent(t, b).Sequence
		check := newFakeCheck(map[string]string{"shared.test": tokenB})
		_, err := f.c.ValidateDomain(ctx, "test", f.org(t, b), "shared.test", check)
		wantCode(t, "a domain another organization verified", err, connect.CodeAlreadyExists)
		if !strings.Contains(err.Error(), "verified by another organization") {
			t.Errorf("message %q", err)
		}
		if len(check.Calls()) != 0 || f.lastEvent(t, b).Sequence != before {
			t.Errorf("checked (%v) or recorded something", check.Calls())
		}
		if ok, _ := f.q.DomainVerified(ctx, b, "shared.test"); ok {
			t.Fatal("two organizations verified one domain")
		}
		if dom := f.domain(t, b, "shared.test"); dom == nil || dom.Verified {
			t.Errorf("the other organization's row: %+v", dom)
		}
		// Once the first removes it, the second may verify it.
		if _, err := f.c.RemoveDomain(ctx, "test", f.org(t, a), "shared.test"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.ValidateDomain(ctx, "test", f.org(t, b), "shared.test", check); err != nil {
			t.Fatalf("after the first removed it: %v", err)
		}
	})
}

// Organizations validating one domain at once: exactly one verifies it,
// the others get AlreadyExists (the unique index decides).
func TestDomainValidationRace(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		const n = 4
		ids := make([]string, n)
		tokens := make([]string, n)
		for i := range n {
			ids[i] = f.addOrg(t, "Org "+string(rune('a'+i)))
			tokens[i] = f.generate(t, ids[i], "race.test", orgs.ValidationDNS)
		}
		racers := make([]*orgs.Org, n)
		for i, id := range ids {
			racers[i] = f.org(t, id)
		}
		// Every check passes only after all have started, so all pass the
		// "verified elsewhere" read first.
		b := newBarrier(n)
		wins, errs := dbtest.Race(n, func(i int) error {
			_, err := f.c.ValidateDomain(ctx, "test", racers[i], "race.test", b.check(tokens[i]))
			return err
		})
		if wins != 1 {
			t.Fatalf("%d organizations verified one domain; errors %v", wins, errs)
		}
		for _, err := range errs {
			wantCode(t, "a loser", err, connect.CodeAlreadyExists)
		}
		var verified int
		for _, id := range ids {
			if ok, _ := f.q.DomainVerified(ctx, id, "race.test"); ok {
				verified++
			}
		}
		if verified != 1 {
			t.Errorf("%d verified rows; want 1", verified)
		}
	})
}

// barrier makes checks that pass (for their token) once n checks started,
// or fail after 10 s.
type barrier struct {
	arrived sync.WaitGroup
	all     chan struct{}
}

func newBarrier(n int) *barrier {
	b := &barrier{all: make(chan struct{})}
	b.arrived.Add(n)
	go func() { b.arrived.Wait(); close(b.all) }()
	return b
}

func (b *barrier) check(token string) barrierCheck { return barrierCheck{b, token} }

type barrierCheck struct {
	b     *barrier
	token string
}

func (c barrierCheck) CheckHTTP(ctx context.Context, domain, token string) error {
	return c.CheckDNS(ctx, domain, token)
}

func (c barrierCheck) CheckDNS(_ context.Context, _, token string) error {
	c.b.arrived.Done()
	select {
	case <-c.b.all:
	case <-time.After(10 * time.Second):
		return errors.New("not every racer got to the check")
	}
	if token != c.token {
		return errors.New("wrong token")
	}
	return nil
}

func TestRemoveDomain(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		_, err := f.c.RemoveDomain(ctx, "test", f.org(t, id), "acme.id.example.com")
		wantCode(t, "removing the primary", err, connect.CodeAborted)
		_, err = f.c.RemoveDomain(ctx, "test", f.org(t, id), "nothing.test")
		wantCode(t, "removing a domain the org lacks", err, connect.CodeNotFound)
		_, err = f.c.RemoveDomain(ctx, "test", f.org(t, id), "not a domain")
		wantCode(t, "removing a non-domain", err, connect.CodeInvalidArgument)
		f.generate(t, id, "pending.test", orgs.ValidationHTTP)
		f.verify(t, id, "verified.test")
		for _, name := range []string{"Pending.test", "verified.test"} {
			evs, err := f.c.RemoveDomain(ctx, "test", f.org(t, id), name)
			if err != nil || len(evs) != 1 || evs[0].Type != orgs.EventDomainRemoved {
				t.Fatalf("remove %s: %v, %v", name, evs, err)
			}
		}
		if ds, _ := f.q.Domains(ctx, id); len(ds) != 1 || ds[0].Domain != "acme.id.example.com" {
			t.Errorf("left: %+v", ds)
		}
		if ok, _ := f.q.DomainVerified(ctx, id, "verified.test"); ok {
			t.Error("a removed domain is verified")
		}
		// It can be added again, unverified.
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, id), "verified.test"); err != nil {
			t.Fatal(err)
		}
		if dom := f.domain(t, id, "verified.test"); dom == nil || dom.Verified || dom.ValidationType != 0 {
			t.Errorf("added again: %+v", dom)
		}
	})
}

// Only a verified domain becomes primary; the organization's primary
// domain, and so its users' login names, follow.
func TestSetPrimaryDomain(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		uq := &users.Queries{DB: f.st}
		uid, _, err := (&users.Commands{ES: f.es, Q: uq}).AddHuman(ctx, "test", f.org(t, id), users.HumanAdded{
			UserName: "alice", FirstName: "A", LastName: "L", DisplayName: "A L", Email: "alice@acme.test"})
		if err != nil {
			t.Fatal(err)
		}
		f.generate(t, id, "pending.test", orgs.ValidationHTTP)
		_, err = f.c.SetPrimaryDomain(ctx, "test", f.org(t, id), "pending.test")
		wantCode(t, "an unverified domain", err, connect.CodeAborted)
		_, err = f.c.SetPrimaryDomain(ctx, "test", f.org(t, id), "nothing.test")
		wantCode(t, "a domain the org lacks", err, connect.CodeNotFound)
		_, err = f.c.SetPrimaryDomain(ctx, "test", f.org(t, id), "acme.id.example.com")
		wantCode(t, "the primary domain", err, connect.CodeAborted)

		f.verify(t, id, "acme.test")
		evs, err := f.c.SetPrimaryDomain(ctx, "test", f.org(t, id), "ACME.test")
		if err != nil || len(evs) != 1 || evs[0].Type != orgs.EventDomainPrimarySet {
			t.Fatalf("set primary: %v, %v", evs, err)
		}
		o := f.org(t, id)
		if o.PrimaryDomain != "acme.test" || o.Version != evs[0].Version {
			t.Errorf("org: primary %q version %d; want acme.test %d", o.PrimaryDomain, o.Version, evs[0].Version)
		}
		if u, err := uq.Get(ctx, uid); err != nil || u.LoginName() != "alice@acme.test" {
			t.Errorf("login name %v, %v; want alice@acme.test", u, err)
		}
		primaries := 0
		ds, _ := f.q.Domains(ctx, id)
		for _, dom := range ds {
			if dom.Primary {
				primaries++
				if dom.Domain != "acme.test" {
					t.Errorf("primary %s", dom.Domain)
				}
			}
		}
		if primaries != 1 {
			t.Errorf("%d primary domains: %+v", primaries, ds)
		}
		// The former primary can go now; the new one cannot.
		_, err = f.c.RemoveDomain(ctx, "test", f.org(t, id), "acme.test")
		wantCode(t, "removing the new primary", err, connect.CodeAborted)
		if _, err := f.c.RemoveDomain(ctx, "test", f.org(t, id), "acme.id.example.com"); err != nil {
			t.Errorf("removing the former primary: %v", err)
		}
	})
}

func TestListDomains(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, d db.Dialect) {
		f := newDomainFixture(t, d)
		ctx := context.Background()
		id := f.addOrg(t, "Acme")
		other := f.addOrg(t, "Bravo")
		for _, name := range []string{"b.example.org", "a.example.org", "c.test"} {
			if _, err := f.c.AddDomain(ctx, "test", f.org(t, id), name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.c.AddDomain(ctx, "test", f.org(t, other), "z.example.org"); err != nil {
			t.Fatal(err)
		}
		names := func(ds []orgs.Domain) string {
			var out []string
			for _, d := range ds {
				if d.OrgID != id {
					t.Errorf("another organization's domain %+v", d)
				}
				out = append(out, d.Domain)
			}
			return strings.Join(out, " ")
		}
		for _, c := range []struct {
			text   string
			method textquery.Method
			want   string
		}{
			{"", textquery.Equals, "a.example.org acme.id.example.com b.example.org c.test"},
			{"", textquery.ContainsIgnoreCase, "a.example.org acme.id.example.com b.example.org c.test"},
			{"example.org", textquery.EndsWith, "a.example.org b.example.org"},
			{"EXAMPLE", textquery.Contains, ""},
			{"EXAMPLE", textquery.ContainsIgnoreCase, "a.example.org acme.id.example.com b.example.org"},
			{"c.test", textquery.Equals, "c.test"},
			{"C.Test", textquery.EqualsIgnoreCase, "c.test"},
			{"a", textquery.StartsWith, "a.example.org acme.id.example.com"},
		} {
			ds, err := f.q.ListDomains(ctx, id, c.text, c.method)
			if got := names(ds); err != nil || got != c.want {
				t.Errorf("ListDomains(%q, %d) = %q, %v; want %q", c.text, c.method, got, err, c.want)
			}
		}
		_, err := f.q.ListDomains(ctx, id, "x", textquery.Method(99))
		wantCode(t, "an undefined method", err, connect.CodeInvalidArgument)
		if ds, err := f.q.ListDomains(ctx, "no-such-org", "", textquery.Equals); err != nil || len(ds) != 0 {
			t.Errorf("an unknown organization: %v, %v", ds, err)
		}
	})
}
