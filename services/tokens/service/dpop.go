package service

import (
	"fmt"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// dpopVerifier checks DPoP proofs at the token and userinfo endpoints.
// Proofs are remembered where every replica sees them: in Redis when the
// deployment has one, else in the tokens database (the embedded server:
// one process). After a start that found the SQLite data not closed, the
// database may have lost the last proofs with the machine, so proofs
// issued before the start are refused (clients make a new one).
func (s *Service) dpopVerifier(cfg *config.Config, st *db.DB, records *store.Store) (*dpop.Verifier, error) {
	v := &dpop.Verifier{Now: time.Now}
	if cfg.RedisURL != "" {
		client, err := revocation.NewRedisClient(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("DPoP replay store: %w", err)
		}
		s.closers = append(s.closers, client.Close)
		v.Replay = &dpop.RedisReplay{Client: client, Prefix: "gatehouse:dpop:"}
	} else {
		v.Replay = dpop.ReplayFunc(records.UseProof)
		if !st.CleanStart() {
			v.NotAfter = time.Now().Add(5 * time.Second) // the verifier's skew: proofs made before the start
		}
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
