package backchannel_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/pkg/testutil"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/dbtest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/backchannel"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

const issuer = "https://id.example.test"

// directory is a fake of the directory's current registrations.
type directory struct {
	mu      sync.Mutex
	clients map[string]*directoryv1.Client
	err     error
	calls   int
}

func (d *directory) Refresh(_ context.Context, clientID string) (*directoryv1.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.err != nil {
		return nil, d.err
	}
	c, ok := d.clients[clientID]
	if !ok {
		return nil, clients.ErrUnknown
	}
	return proto.Clone(c).(*directoryv1.Client), nil
}

// put registers an OIDC app with back-channel URI uri ("" for none).
func (d *directory) put(clientID, uri string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clients[clientID] = &directoryv1.Client{ClientId: clientID, Kind: directoryv1.ClientKind_CLIENT_KIND_OIDC_APP, Active: true,
		BackChannelLogoutUri: uri}
}

func (d *directory) remove(clientID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.clients, clientID)
}

func (d *directory) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

// receiver is a relying party's back-channel endpoint: it records every
// POST and answers with the next of its statuses (the last one
// repeatedly).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []received
}

type received struct {
	contentType string
	form        url.Values
	path        string
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		form, _ := url.ParseQuery(string(body))
		r.mu.Lock()
		r.got = append(r.got, received{contentType: req.Header.Get("Content-Type"), form: form, path: req.URL.Path})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status = r.statuses[0]
			if len(r.statuses) > 1 {
				r.statuses = r.statuses[1:]
			}
		}
		r.mu.Unlock()
		if status/100 == 3 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// env is an Outbox on a real tokens database, with a settable clock; the
// signing keys run on the real clock, so moving the outbox's clock a day
// on does not make them stale.
type env struct {
	opts   db.Options
	store  *store.Store
	clock  *keytest.Clock
	keys   *keys.Manager
	dir    *directory
	log    *testutil.SyncBuffer
	outbox *backchannel.Outbox
}

func newEnv(t *testing.T, d db.Dialect) *env {
	t.Helper()
	e := &env{opts: keytest.DBOptions(t, d), clock: keytest.NewClock(time.Now().UTC().Truncate(time.Second)), dir: &directory{clients: map[string]*directoryv1.Client{}},
		log: &testutil.SyncBuffer{}}
	e.store = &store.Store{DB: keytest.Open(t, e.opts)}
	e.keys = keytest.Manager(t, e.store.DB, keytest.Options(keys.ES256, nil))
	e.outbox = e.newOutbox(e.store, backchannel.NewHTTPClient(netguard.Policy{AllowLoopback: true}))
	return e
}

// newOutbox is another sender on st (a replica) posting with c.
func (e *env) newOutbox(st *store.Store, c *http.Client) *backchannel.Outbox {
	return &backchannel.Outbox{Issuer: issuer, Store: st, Clients: e.dir, Signer: e.keys, HTTP: c, Now: e.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(e.log, nil))}
}

// logout ends session sid of alice for the apps in clients, as a
// revocation does.
func (e *env) logout(t *testing.T, sid string, clientIDs ...string) {
	t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	for _, c := range clientIDs {
		if err := e.store.RecordSessionClient(ctx, nil, sid, c, "alice", now.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.QueueSessionLogouts(ctx, nil, sid, now); err != nil {
		t.Fatal(err)
	}
}

// deliver runs one round and returns when the next logout falls due.
func (e *env) deliver(t *testing.T) time.Time {
	t.Helper()
	next, err := e.outbox.Deliver(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func (e *env) pending(t *testing.T) []store.Logout {
	t.Helper()
	due, _, err := e.store.DueLogouts(context.Background(), e.clock.Now().Add(48*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	return due
}

// verify checks a received logout token as a relying party must
// (Back-Channel Logout 1.0 §2.6) against the published keys, and returns
// its claims.
func (e *env) verify(t *testing.T, r received, clientID, sid string) map[string]any {
	t.Helper()
	if r.contentType != "application/x-www-form-urlencoded" || len(r.form) != 1 || len(r.form["logout_token"]) != 1 {
		t.Fatalf("request: Content-Type %q, form %v; want one logout_token, form-encoded", r.contentType, r.form)
	}
	raw := r.form.Get("logout_token")
	var set []json.RawMessage
	for _, k := range e.keys.PublicKeys().Keys {
		b, err := json.Marshal(k.JWK)
		if err != nil {
			t.Fatal(err)
		}
		set = append(set, b)
	}
	doc, _ := json.Marshal(map[string]any{"keys": set})
	published, err := jwk.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := jws.Verify([]byte(raw), jws.WithKeySet(published, jws.WithRequireKid(true)))
	if err != nil {
		t.Fatalf("logout token signature: %v", err)
	}
	msg, err := jws.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if typ, _ := msg.Signatures()[0].ProtectedHeaders().Type(); typ != "logout+jwt" {
		t.Fatalf("typ %q; want logout+jwt", typ)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	now := float64(e.clock.Now().Unix())
	iat, _ := c["iat"].(float64)
	exp, _ := c["exp"].(float64)
	jti, _ := c["jti"].(string)
	events, _ := c["events"].(map[string]any)
	member, ok := events[backchannel.Event].(map[string]any)
	switch {
	case c["iss"] != issuer || c["aud"] != clientID || c["sub"] != "alice" || c["sid"] != sid:
		t.Fatalf("claims %v; want iss %s, aud %s, sub alice, sid %s", c, issuer, clientID, sid)
	case iat > now || iat < now-5 || exp-iat != backchannel.TokenTTL.Seconds():
		t.Fatalf("iat %v exp %v at %v; want iat now and a %v lifetime", iat, exp, now, backchannel.TokenTTL)
	case len(jti) < 16:
		t.Fatalf("jti %q; want a random one", jti)
	case !ok || len(member) != 0 || len(events) != 1:
		t.Fatalf("events %v; want exactly {%q: {}}", c["events"], backchannel.Event)
	case c["nonce"] != nil:
		t.Fatalf("nonce %v; a logout token has none", c["nonce"])
	}
	return c
}

// Each app of the ended session with a back-channel URI gets one signed
// logout token there; an app without one gets nothing and its row goes;
// another session's app is not told. Logs name the client and status,
// never the URI or the token.
func TestOutboxDelivers(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		a, other := newReceiver(t), newReceiver(t)
		e.dir.put("app-a", a.URL+"/logout?tenant=s3cr3t-query")
		e.dir.put("app-b", "")
		e.dir.put("app-c", other.URL+"/logout")
		e.logout(t, "sid-1", "app-a", "app-b")
		if err := e.store.RecordSessionClient(context.Background(), nil, "sid-2", "app-c", "alice", e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if next := e.deliver(t); !next.IsZero() {
			t.Fatalf("next %v; want nothing left", next)
		}
		got := a.requests()
		if len(got) != 1 || got[0].path != "/logout" {
			t.Fatalf("app-a received %v; want one POST at /logout", got)
		}
		claims := e.verify(t, got[0], "app-a", "sid-1")
		if n := len(other.requests()); n != 0 {
			t.Fatalf("another session's app received %d logout tokens", n)
		}
		if p := e.pending(t); len(p) != 0 {
			t.Fatalf("outbox after delivery: %v; want empty", p)
		}
		log := e.log.String()
		for _, secret := range []string{got[0].form.Get("logout_token"), "s3cr3t-query", a.URL, claims["jti"].(string)} {
			if strings.Contains(log, secret) {
				t.Fatalf("the log holds %q:\n%s", secret, log)
			}
		}
		if !strings.Contains(log, `"msg":"back-channel logout delivered","client_id":"app-a"`) || !strings.Contains(log, `"status":200`) ||
			!strings.Contains(log, `"msg":"back-channel logout dropped","client_id":"app-b"`) {
			t.Fatalf("log lacks the delivery and the drop:\n%s", log)
		}
	})
}

// A failed try (an error status, a redirect, which is not followed) is
// retried after a backoff, not before; a 2xx ends it.
func TestOutboxRetries(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		r := newReceiver(t, 500, 302, 204)
		e.dir.put("app", r.URL+"/bc")
		e.logout(t, "sid", "app")
		t0 := e.clock.Now()
		next := e.deliver(t)
		if n := len(r.requests()); n != 1 || next.Before(t0.Add(500*time.Millisecond)) || next.After(t0.Add(time.Second)) {
			t.Fatalf("after a 500: %d requests, next try at +%v; want 1 and +0.5s to +1s", n, next.Sub(t0))
		}
		e.clock.Set(next.Add(-time.Millisecond))
		if again := e.deliver(t); !again.Equal(next) || len(r.requests()) != 1 {
			t.Fatalf("before the backoff ended: %d requests, next %v; want none more", len(r.requests()), again)
		}
		e.clock.Set(next)
		t1 := next
		next = e.deliver(t)
		got := r.requests()
		if len(got) != 2 || next.Before(t1.Add(time.Second)) || next.After(t1.Add(2*time.Second)) {
			t.Fatalf("after a 302: %d requests, next try at +%v; want 2 and +1s to +2s", len(got), next.Sub(t1))
		}
		for _, g := range got {
			if g.path != "/bc" {
				t.Fatalf("a request reached %s: the redirect was followed", g.path)
			}
		}
		e.clock.Set(next)
		if next := e.deliver(t); !next.IsZero() || len(r.requests()) != 3 || len(e.pending(t)) != 0 {
			t.Fatalf("after a 204: %d requests, next %v, outbox %v; want delivered", len(r.requests()), next, e.pending(t))
		}
		e.verify(t, r.requests()[2], "app", "sid")
		if log := e.log.String(); !strings.Contains(log, `"status":500`) || !strings.Contains(log, `"status":302`) ||
			!strings.Contains(log, `"attempts":3`) {
			t.Fatalf("log lacks the failed tries:\n%s", log)
		}
	})
}

// A delivery still failing GiveUp after the logout is dropped with a
// warning; until then it is kept.
func TestOutboxGivesUp(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		r := newReceiver(t, 503)
		e.dir.put("app", r.URL)
		e.logout(t, "sid", "app")
		t0 := e.clock.Now()
		e.clock.Set(t0.Add(backchannel.GiveUp - time.Second))
		if next := e.deliver(t); next.IsZero() || len(e.pending(t)) != 1 {
			t.Fatalf("a second before the budget: next %v, outbox %v; want still queued", next, e.pending(t))
		}
		e.clock.Set(t0.Add(backchannel.GiveUp))
		if next := e.deliver(t); !next.IsZero() || len(e.pending(t)) != 0 || len(r.requests()) != 2 {
			t.Fatalf("at the budget: next %v, outbox %v, %d requests; want tried once more and dropped", next, e.pending(t), len(r.requests()))
		}
		if log := e.log.String(); !strings.Contains(log, `"level":"WARN","msg":"back-channel logout given up","client_id":"app"`) {
			t.Fatalf("no warning for the given up logout:\n%s", log)
		}
	})
}

// The URI is read from the client's registration at each try: a changed
// URI gets it, a client that lost its URI or was removed drops it, and a
// directory outage retries it.
func TestOutboxReadsRegistrationAtDelivery(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		before, after := newReceiver(t), newReceiver(t)
		e.dir.put("moved", before.URL)
		e.dir.put("unset", before.URL)
		e.dir.put("removed", before.URL)
		e.logout(t, "sid", "moved", "unset", "removed")
		e.dir.put("moved", after.URL)
		e.dir.put("unset", "")
		e.dir.remove("removed")
		e.dir.fail(errors.New("directory down"))
		e.deliver(t)
		if p := e.pending(t); len(p) != 3 || len(before.requests())+len(after.requests()) != 0 {
			t.Fatalf("directory down: outbox %v, %d requests; want all kept, nothing sent", p, len(before.requests())+len(after.requests()))
		}
		e.dir.fail(nil)
		e.clock.Advance(time.Second)
		e.deliver(t)
		if len(before.requests()) != 0 || len(after.requests()) != 1 || len(e.pending(t)) != 0 {
			t.Fatalf("old URI %d, new URI %d requests, outbox %v; want only the new URI, once, and nothing left",
				len(before.requests()), len(after.requests()), e.pending(t))
		}
		e.verify(t, after.requests()[0], "moved", "sid")
	})
}

// Two replicas' senders that read one logout as due at once: one sends
// it, the other does not, even while the first is still waiting for the
// receiver's answer.
func TestOutboxOneSenderPerLogout(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, d db.Dialect) {
		e := newEnv(t, d)
		arrived, release := make(chan struct{}, 2), make(chan struct{})
		r := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			arrived <- struct{}{}
			<-release
		}))
		t.Cleanup(r.Close)
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		e.dir.put("app", r.URL)
		e.logout(t, "sid", "app")
		replica := e.newOutbox(&store.Store{DB: keytest.Open(t, e.opts)}, backchannel.NewHTTPClient(netguard.Policy{AllowLoopback: true}))
		done := make(chan error, 2)
		for _, o := range []*backchannel.Outbox{e.outbox, replica} {
			go func() {
				_, err := o.Deliver(context.Background())
				done <- err
			}()
		}
		<-arrived
		// The other sender finishes without sending while the first waits.
		select {
		case <-arrived:
			t.Fatal("both senders posted the logout")
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if p := e.pending(t); len(p) != 0 {
			t.Fatalf("outbox %v; want the delivered logout gone", p)
		}
	})
}
