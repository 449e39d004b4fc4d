package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// dpopVerifier checks DPoP proofs at the token and userinfo endpoints.
// Proofs are remembered where every replica sees them: in Redis when the
// deployment has one; in this process's memory for the embedded server
// (SQLite: one process serves every request), kept across a clean stop in
// the database; else in the database (PostgreSQL without Redis). After a
// start that found the SQLite data not closed, what the last process
// remembered is lost, so proofs made before the start are refused.
func (s *Service) dpopVerifier(ctx context.Context, cfg *config.Config, st *db.DB, records *store.Store, logger *slog.Logger) (*dpop.Verifier, error) {
	v := &dpop.Verifier{Now: time.Now}
	switch {
	case cfg.RedisURL != "":
		client, err := revocation.NewRedisClient(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("DPoP replay store: %w", err)
		}
		s.closers = append(s.closers, client.Close)
		v.Replay = &dpop.RedisReplay{Client: client, Prefix: "gatehouse:dpop:"}
	case st.Dialect() == db.SQLite:
		mem := &dpop.MemoryReplay{Now: time.Now}
		entries, err := records.TakeProofSnapshot(ctx, time.Now())
		if err != nil {
			return nil, err
		}
		mem.Load(entries)
		if !st.CleanStart() {
			v.NotAfter = time.Now().Add(5 * time.Second) // the verifier's skew: any proof made before the start
			logger.Warn("tokens: the database was not closed at the last stop; DPoP proofs made before this start are refused (the proofs it had seen are lost)")
		}
		// Before the database closes (Close runs closers first).
		s.closers = append(s.closers, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := records.SaveProofSnapshot(ctx, mem.Entries()); err != nil {
				// Without the snapshot the next start must refuse older
				// proofs, as after a crash.
				st.MarkUnclean()
				return err
			}
			return nil
		})
		v.Replay = mem
	default:
		v.Replay = dpop.ReplayFunc(records.UseProof)
	}
	if cfg.DPoPRequireNonce {
		key, err := secrets.DeriveKey(cfg.MasterKey, secrets.PurposeDPoPNonces)
		if err != nil {
			return nil, fmt.Errorf("DPoP nonces: %w", err)
		}
		v.Nonces = &dpop.Nonces{Key: key, Now: time.Now}
	}
	return v, nil
}
