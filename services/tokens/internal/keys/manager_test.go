package keys_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func forEachDialect(t *testing.T, f func(t *testing.T, d db.Dialect)) {
	for _, d := range keytest.Dialects {
		t.Run(string(d), func(t *testing.T) { f(t, d) })
	}
}

func signerID(t *testing.T, m *keys.Manager) string {
	t.Helper()
	s, err := m.Signer()
	if err != nil {
		t.Fatalf("Signer: %v", err)
	}
	return s.KeyID
}

func publishedIDs(m *keys.Manager) []string {
	var ids []string
	for _, k := range m.PublicKeys().Keys {
		ids = append(ids, k.ID)
	}
	return ids
}

func list(t *testing.T, m *keys.Manager) []keys.KeyInfo {
	t.Helper()
	ks, err := m.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return ks
}

func reload(t *testing.T, m *keys.Manager) {
	t.Helper()
	if err := m.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
}

func rowCount(t *testing.T, store *db.DB) int {
	t.Helper()
	var n int
	if err := store.Get(context.Background(), &n, `SELECT COUNT(*) FROM signing_keys`); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLifecycle follows a key from creation to deletion on two replicas:
// the first key signs at once; the next is published PrePublish before it
// signs; the old one stays verifiable until its tokens expire.
func TestLifecycle(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		clock := keytest.NewClock(t0)
		o := keytest.DBOptions(t, d)
		storeA, storeB := keytest.Open(t, o), keytest.Open(t, o)
		opts := keytest.Options(keys.ES256, clock)
		a := keytest.Manager(t, storeA, opts)

		ks := list(t, a)
		if len(ks) != 1 {
			t.Fatalf("keys after first start: got %d; want 1", len(ks))
		}
		k1 := ks[0]
		if k1.State != keys.StateActive || !k1.SignFrom.Equal(k1.CreatedAt) || k1.Generation != 1 || k1.Algorithm != keys.ES256 {
			t.Fatalf("first key: got %+v; want active ES256 generation 1 signing from creation", k1)
		}
		if got := signerID(t, a); got != k1.ID {
			t.Fatalf("signer: got %s; want %s", got, k1.ID)
		}
		v1 := a.PublicKeys().Version
		tok1, err := a.Sign([]byte(`{"sub":"alice"}`))
		if err != nil {
			t.Fatal(err)
		}

		// Not yet due: one second before RotationInterval - PrePublish.
		clock.Advance(opts.RotationInterval - keys.DefaultPrePublish - time.Second)
		reload(t, a)
		if n := len(list(t, a)); n != 1 {
			t.Fatalf("keys before rotation is due: got %d; want 1", n)
		}
		if a.PublicKeys().Version != v1 {
			t.Fatalf("key set version changed without a change of keys")
		}

		clock.Advance(time.Second)
		rotatedAt := clock.Now()
		reload(t, a)
		ks = list(t, a)
		if len(ks) != 2 {
			t.Fatalf("keys after rotation: got %d; want 2", len(ks))
		}
		k2, k1 := ks[0], ks[1]
		if k2.State != keys.StatePublished || !k2.SignFrom.Equal(rotatedAt.Add(keys.DefaultPrePublish)) || k2.Generation != 2 {
			t.Fatalf("next key: got %+v; want published, generation 2, signing from %s", k2, rotatedAt.Add(keys.DefaultPrePublish))
		}
		wantExpiry := k2.SignFrom.Add(opts.MaxTokenLifetime + keys.DefaultExpirySkew)
		if k1.State != keys.StateActive || !k1.RetireAt.Equal(k2.SignFrom) || !k1.ExpiresAt.Equal(wantExpiry) {
			t.Fatalf("old key: got %+v; want active, retiring at %s, expiring at %s", k1, k2.SignFrom, wantExpiry)
		}
		if got := publishedIDs(a); strings.Join(got, ",") != k2.ID+","+k1.ID {
			t.Fatalf("published: got %v; want [%s %s]", got, k2.ID, k1.ID)
		}
		if a.PublicKeys().Version == v1 {
			t.Fatalf("key set version unchanged after a new key was published")
		}

		// A replica starting now publishes the new key but signs with the old.
		b := keytest.Manager(t, storeB, opts)
		if got := publishedIDs(b); len(got) != 2 {
			t.Fatalf("replica publishes %v; want both keys", got)
		}
		for name, m := range map[string]*keys.Manager{"a": a, "b": b} {
			if got := signerID(t, m); got != k1.ID {
				t.Fatalf("%s signs with %s before sign_from; want %s", name, got, k1.ID)
			}
		}

		// At sign_from both switch, by their clocks, without a reload.
		clock.Set(k2.SignFrom.Add(-time.Microsecond))
		reload(t, a)
		reload(t, b)
		if got := signerID(t, b); got != k1.ID {
			t.Fatalf("signer just before sign_from: got %s; want %s", got, k1.ID)
		}
		clock.Set(k2.SignFrom)
		for name, m := range map[string]*keys.Manager{"a": a, "b": b} {
			if got := signerID(t, m); got != k2.ID {
				t.Fatalf("%s signs with %s at sign_from; want %s", name, got, k2.ID)
			}
		}
		reload(t, b)
		ks = list(t, b)
		if ks[0].State != keys.StateActive || ks[1].State != keys.StateRetired {
			t.Fatalf("states after switch: got %v, %v; want active, retired", ks[0].State, ks[1].State)
		}
		// Tokens of the retired key still verify.
		if _, err := b.Verify(tok1); err != nil {
			t.Fatalf("token of the retired key: %v", err)
		}

		// Once every token of the old key has expired it leaves the key
		// set and the table.
		clock.Set(wantExpiry.Add(-time.Microsecond))
		reload(t, a)
		if _, ok := a.KeyByID(k1.ID); !ok {
			t.Fatalf("old key left the key set before it expired")
		}
		clock.Set(wantExpiry)
		reload(t, a)
		if _, ok := a.KeyByID(k1.ID); ok {
			t.Fatalf("old key still published at its expiry")
		}
		for _, info := range list(t, a) {
			if info.ID == k1.ID {
				t.Fatalf("old key still listed after expiry")
			}
		}
		var n int
		if err := storeA.Get(ctx, &n, `SELECT COUNT(*) FROM signing_keys WHERE id = ?`, k1.ID); err != nil || n != 0 {
			t.Fatalf("old key row: got %d (err %v); want deleted", n, err)
		}
		if _, err := a.Verify(tok1); !errors.Is(err, keys.ErrInvalidToken) {
			t.Fatalf("token of a deleted key: got %v; want ErrInvalidToken", err)
		}
	})
}

// TestStale: a replica that cannot reload stops signing PrePublish after
// its last load, because a key created since may retire its key by then.
func TestStale(t *testing.T) {
	clock := keytest.NewClock(t0)
	store := keytest.Open(t, keytest.DBOptions(t, db.SQLite))
	m := keytest.Manager(t, store, keytest.Options(keys.EdDSA, clock))
	clock.Advance(keys.DefaultPrePublish - time.Microsecond)
	if _, err := m.Signer(); err != nil {
		t.Fatalf("signer just before staleness: %v", err)
	}
	if err := m.Ready(context.Background()); err != nil {
		t.Fatalf("Ready just before staleness: %v", err)
	}
	clock.Advance(time.Microsecond)
	if _, err := m.Sign([]byte(`{}`)); !errors.Is(err, keys.ErrStale) {
		t.Fatalf("sign with stale keys: got %v; want ErrStale", err)
	}
	if err := m.Ready(context.Background()); !errors.Is(err, keys.ErrStale) {
		t.Fatalf("Ready with stale keys: got %v; want ErrStale", err)
	}
	reload(t, m)
	if _, err := m.Sign([]byte(`{}`)); err != nil {
		t.Fatalf("sign after reload: %v", err)
	}

	// A failed reload keeps the old snapshot, which turns stale in time.
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(context.Background()); err == nil {
		t.Fatalf("reload on a closed database succeeded")
	}
	if _, err := m.Signer(); err != nil {
		t.Fatalf("signer right after a failed reload: %v", err)
	}
	clock.Advance(keys.DefaultPrePublish)
	if _, err := m.Signer(); !errors.Is(err, keys.ErrStale) {
		t.Fatalf("signer after failed reloads: got %v; want ErrStale", err)
	}
}

// TestConcurrentFirstStart: replicas starting together on an empty table
// create exactly one first key and all sign with it.
func TestConcurrentFirstStart(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d db.Dialect) {
		o := keytest.DBOptions(t, d)
		clock := keytest.NewClock(t0)
		const replicas = 5
		stores := make([]*db.DB, replicas)
		for i := range stores {
			stores[i] = keytest.Open(t, o)
		}
		ms := make([]*keys.Manager, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i := range ms {
			wg.Go(func() { ms[i], errs[i] = keys.New(context.Background(), stores[i], keytest.Options(keys.ES256, clock)) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d: %v", i, err)
			}
		}
		if n := rowCount(t, stores[0]); n != 1 {
			t.Fatalf("keys after concurrent first start: got %d; want 1", n)
		}
		want := signerID(t, ms[0])
		for i, m := range ms {
			if got := signerID(t, m); got != want {
				t.Fatalf("replica %d signs with %s; want %s", i, got, want)
			}
		}
	})
}

// TestConcurrentAutomaticRotation: replicas reloading at the moment a
// rotation is due create exactly one next key.
func TestConcurrentAutomaticRotation(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d db.Dialect) {
		o := keytest.DBOptions(t, d)
		clock := keytest.NewClock(t0)
		opts := keytest.Options(keys.ES256, clock)
		const replicas = 6
		ms := make([]*keys.Manager, replicas)
		for i := range ms {
			ms[i] = keytest.Manager(t, keytest.Open(t, o), opts)
		}
		for round := 1; round <= 3; round++ {
			clock.Advance(opts.RotationInterval)
			errs := make([]error, replicas)
			var wg sync.WaitGroup
			for i, m := range ms {
				wg.Go(func() { errs[i] = m.Reload(context.Background()) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d replica %d: %v", round, i, err)
				}
			}
			ks := list(t, ms[0])
			if len(ks) != round+1 {
				t.Fatalf("round %d: got %d keys; want %d", round, len(ks), round+1)
			}
			for i, k := range ks {
				if want := int64(round + 1 - i); k.Generation != want {
					t.Fatalf("round %d: key %d has generation %d; want %d", round, i, k.Generation, want)
				}
			}
			for i, m := range ms {
				if _, ok := m.KeyByID(ks[0].ID); !ok {
					t.Fatalf("round %d: replica %d does not publish the new key", round, i)
				}
			}
		}
	})
}

// TestRotate: on-demand rotation with each algorithm, including while a
// rotation is already pending, and refusal of unsupported algorithms.
func TestRotate(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		clock := keytest.NewClock(t0)
		store := keytest.Open(t, keytest.DBOptions(t, d))
		m := keytest.Manager(t, store, keytest.Options(keys.ES256, clock))
		k1 := signerID(t, m)

		for _, alg := range []string{"HS256", "none", "rs256", "ES384"} {
			if _, err := m.Rotate(ctx, alg); !errors.Is(err, keys.ErrUnsupportedAlgorithm) {
				t.Fatalf("Rotate(%q): got %v; want ErrUnsupportedAlgorithm", alg, err)
			}
		}
		if n := rowCount(t, store); n != 1 {
			t.Fatalf("refused rotations stored keys: %d rows", n)
		}

		k2, err := m.Rotate(ctx, keys.EdDSA)
		if err != nil {
			t.Fatal(err)
		}
		if k2.Algorithm != keys.EdDSA || k2.State != keys.StatePublished || !k2.SignFrom.Equal(t0.Add(keys.DefaultPrePublish)) {
			t.Fatalf("rotated key: got %+v; want EdDSA, published, signing from %s", k2, t0.Add(keys.DefaultPrePublish))
		}
		if _, ok := m.KeyByID(k2.ID); !ok {
			t.Fatalf("rotated key is not published at once")
		}
		// A second rotation while the first is pending signs after it.
		k3, err := m.Rotate(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if k3.Algorithm != keys.ES256 || !k3.SignFrom.After(k2.SignFrom) || k3.Generation != k2.Generation+1 {
			t.Fatalf("second rotation: got %+v; want ES256 after %s", k3, k2.SignFrom)
		}
		ks := list(t, m)
		if len(ks) != 3 || ks[0].ID != k3.ID || ks[1].ID != k2.ID || ks[2].ID != k1 {
			t.Fatalf("list: got %+v; want k3, k2, k1", ks)
		}
		if !ks[1].RetireAt.Equal(k3.SignFrom) || !ks[2].RetireAt.Equal(k2.SignFrom) {
			t.Fatalf("retirements: k2 %s (want %s), k1 %s (want %s)", ks[1].RetireAt, k3.SignFrom, ks[2].RetireAt, k2.SignFrom)
		}
		for _, step := range []struct {
			at   time.Time
			want string
		}{{k2.SignFrom.Add(-time.Microsecond), k1}, {k2.SignFrom, k2.ID}, {k3.SignFrom, k3.ID}} {
			clock.Set(step.at)
			reload(t, m)
			if got := signerID(t, m); got != step.want {
				t.Fatalf("signer at %s: got %s; want %s", step.at, got, step.want)
			}
		}
	})
}

// TestConcurrentRotate: simultaneous on-demand rotations on several
// replicas each either create a key or report ErrConcurrentRotation;
// generations stay unique and contiguous.
func TestConcurrentRotate(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d db.Dialect) {
		o := keytest.DBOptions(t, d)
		clock := keytest.NewClock(t0)
		const replicas = 6
		ms := make([]*keys.Manager, replicas)
		for i := range ms {
			ms[i] = keytest.Manager(t, keytest.Open(t, o), keytest.Options(keys.EdDSA, clock))
		}
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i, m := range ms {
			wg.Go(func() { _, errs[i] = m.Rotate(context.Background(), "") })
		}
		wg.Wait()
		created := 0
		for i, err := range errs {
			switch {
			case err == nil:
				created++
			case !errors.Is(err, keys.ErrConcurrentRotation):
				t.Fatalf("replica %d: got %v; want success or ErrConcurrentRotation", i, err)
			}
		}
		if created == 0 {
			t.Fatalf("no concurrent rotation succeeded")
		}
		ks := list(t, ms[0])
		if len(ks) != created+1 {
			t.Fatalf("keys: got %d; want %d (first + %d rotations)", len(ks), created+1, created)
		}
		for i, k := range ks {
			if want := int64(len(ks) - i); k.Generation != want {
				t.Fatalf("key %d generation %d; want %d", i, k.Generation, want)
			}
			if i > 0 && !ks[i-1].SignFrom.After(k.SignFrom) {
				t.Fatalf("sign_from does not grow with generation: %s then %s", k.SignFrom, ks[i-1].SignFrom)
			}
		}
	})
}

// TestPrivateKeysEncrypted: the table holds only ciphertext bound to the
// key id, and a manager with another master key refuses to start.
func TestPrivateKeysEncrypted(t *testing.T) {
	forEachDialect(t, func(t *testing.T, d db.Dialect) {
		ctx := context.Background()
		o := keytest.DBOptions(t, d)
		store := keytest.Open(t, o)
		m := keytest.Manager(t, store, keytest.Options(keys.RS256, nil))
		s, err := m.Signer()
		if err != nil {
			t.Fatal(err)
		}
		assertEncrypted(t, store, s)

		// Moving the ciphertext to another row makes it undecryptable.
		k2, err := m.Rotate(ctx, keys.RS256)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Exec(ctx, `UPDATE signing_keys SET private_key = (SELECT private_key FROM signing_keys WHERE id = ?) WHERE id = ?`, s.KeyID, k2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := keys.New(ctx, keytest.Open(t, o), keytest.Options(keys.RS256, nil)); err == nil || !strings.Contains(err.Error(), "decrypt") {
			t.Fatalf("start with a swapped ciphertext: got %v; want a decryption error", err)
		}
		if _, err := store.Exec(ctx, `DELETE FROM signing_keys WHERE id = ?`, k2.ID); err != nil {
			t.Fatal(err)
		}

		other := keytest.Options(keys.RS256, nil)
		other.MasterKey = make([]byte, 32)
		if _, err := keys.New(ctx, keytest.Open(t, o), other); err == nil || !strings.Contains(err.Error(), "master key") {
			t.Fatalf("start with another master key: got %v; want a decryption error", err)
		}
	})
}

// TestOptions: invalid options are refused, every problem named.
func TestOptions(t *testing.T) {
	store := keytest.Open(t, keytest.DBOptions(t, db.SQLite))
	o := keytest.Options("HS256", nil)
	o.MaxTokenLifetime = 0
	o.PrePublish = 30 * time.Second
	o.RotationInterval = 20 * time.Second
	_, err := keys.New(context.Background(), store, o)
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"unsupported signing algorithm", "MaxTokenLifetime", "PrePublish 30s must exceed", "RotationInterval 20s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	o = keytest.Options(keys.RS256, nil)
	o.MasterKey = []byte("short")
	if _, err := keys.New(context.Background(), store, o); err == nil {
		t.Fatal("short master key accepted")
	}
	if n := rowCount(t, store); n != 0 {
		t.Fatalf("refused options created %d keys", n)
	}
}

// TestLoop: Start reloads every ReloadInterval, so a key another replica
// creates is published here at the next reload, and the loop rotates when
// a rotation falls due; Stop ends the loop. In a synctest bubble the
// loop's ticker and the manager's clock (Options.Now unset: time.Now) are
// the bubble's fake one.
func TestLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		o := keytest.DBOptions(t, db.SQLite)
		opts := keytest.Options(keys.EdDSA, nil)
		start := time.Now()
		a := keytest.Manager(t, keytest.Open(t, o), opts)
		b := keytest.Manager(t, keytest.Open(t, o), opts)
		a.Start(ctx)
		a.Start(ctx) // no-op

		k, err := b.Rotate(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(keys.DefaultReloadInterval - time.Nanosecond)
		synctest.Wait()
		if _, ok := a.KeyByID(k.ID); ok {
			t.Fatal("another replica's key published before the next reload")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if _, ok := a.KeyByID(k.ID); !ok {
			t.Fatal("another replica's key not published at the next reload")
		}

		// k signs from start+PrePublish; the next key is due RotationInterval
		// after that, less PrePublish: at a reload, since both are multiples
		// of ReloadInterval.
		due := start.Add(opts.RotationInterval)
		time.Sleep(time.Until(due) - time.Nanosecond)
		synctest.Wait()
		if n := len(list(t, a)); n != 2 {
			t.Fatalf("keys before the rotation is due: %d; want 2", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		ks := list(t, a)
		if len(ks) != 3 || ks[0].Generation != 3 || !ks[0].SignFrom.Equal(due.Add(keys.DefaultPrePublish)) {
			t.Fatalf("keys when the rotation is due: %+v; want a third, signing from %s", ks, due.Add(keys.DefaultPrePublish))
		}
		if _, ok := a.KeyByID(ks[0].ID); !ok {
			t.Fatal("the loop's new key is not published")
		}
		a.Stop()
		a.Stop() // idempotent
	})
}
