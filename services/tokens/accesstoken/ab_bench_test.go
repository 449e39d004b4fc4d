package accesstoken

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/testutil/benchcpu"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys/keytest"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
)

// BenchmarkABVerifiedTokenCache is make bench-ab's pair (bench/README,
// "Hand-made machinery") for the Verifier's cache of verified tokens: 16
// concurrent Verify calls, each on its own JWT access token signed by the
// tokens service's key manager, as introspection makes them (the manager's
// Verify, no audience, the revocation list asked every time: the
// in-memory list of embedded mode, loaded, so a check is a map lookup).
// ab=hand answers from the cache; ab=plain invalidates the token's entry
// first, so every Verify checks the signature and decodes the claims
// again; the invalidation, the miss and the write back cost plain about
// 0.8 µs on top (2–3% of it), with no change to Verify.
func BenchmarkABVerifiedTokenCache(b *testing.B) {
	for _, alg := range []string{keys.RS256, keys.ES256} {
		for _, arm := range []string{"hand", "plain"} {
			b.Run(alg+"/ab="+arm, func(b *testing.B) {
				ctx := context.Background()
				d := keytest.Open(b, keytest.DBOptions(b, db.SQLite))
				m := keytest.Manager(b, d, keytest.Options(alg, nil))
				revoked, err := revocation.New(d, revocation.Options{Logger: keytest.Quiet})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = revoked.Close() })
				if err := revoked.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				v := &Verifier{Issuer: issuer, Revoked: revoked,
					Keys: KeysFunc(func(_ context.Context, token string) ([]byte, error) { return m.Verify(token) })}
				tokens := make([]string, 64) // one per goroutine
				now := time.Now()
				for i := range tokens {
					claims, err := json.Marshal(Claims{Issuer: issuer, Subject: "312909075212468632",
						Audience: Audience{"312909075212468633", "312909075212468634"}, Expiry: now.Add(time.Hour).Unix(),
						IssuedAt: now.Unix(), NotBefore: now.Unix(), JTI: "jti-" + strconv.Itoa(i),
						ClientID: "312909075212468633@gatehouse", Scope: "openid profile email"})
					if err != nil {
						b.Fatal(err)
					}
					if tokens[i], err = m.Sign(claims); err != nil {
						b.Fatal(err)
					}
					if _, err := v.Verify(ctx, tokens[i]); err != nil {
						b.Fatal(err)
					}
				}
				plain := arm == "plain"
				var goroutines atomic.Int64
				b.SetParallelism(8) // × GOMAXPROCS (2) = 16 concurrent requests
				b.ReportAllocs()
				meter := benchcpu.Start(b)
				b.RunParallel(func(pb *testing.PB) {
					raw := tokens[int(goroutines.Add(1)-1)%len(tokens)]
					for pb.Next() {
						if plain {
							v.cache.Invalidate(raw)
						}
						if _, err := v.Verify(ctx, raw); err != nil {
							b.Errorf("Verify: %v", err)
							return
						}
					}
				})
				meter.Report(b)
			})
		}
	}
}
