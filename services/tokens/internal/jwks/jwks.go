package jwks

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gatehouse-id/gatehouse/services/tokens/internal/cachedjson"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// Path is where the key set is served.
const Path = "/oauth/v2/keys"

// Source provides the published keys; keys.Manager implements it.
type Source interface {
	PublicKeys() keys.PublicKeySet
}

var _ Source = (*keys.Manager)(nil)

// Handler serves the key set.
type Handler struct{ *cachedjson.Handler }

// NewHandler serves the keys of src, cacheable for maxAge (pass
// keys.Manager.KeySetMaxAge, which the pre-publication window was checked
// against): serialized again only when the published keys change.
func NewHandler(src Source, maxAge time.Duration, logger *slog.Logger) *Handler {
	return &Handler{cachedjson.New("jwks", "public, max-age="+strconv.FormatInt(int64(maxAge/time.Second), 10),
		func() (uint64, func() ([]byte, error)) {
			set := src.PublicKeys()
			return set.Version, func() ([]byte, error) { return serialize(set) }
		}, logger)}
}

func serialize(set keys.PublicKeySet) ([]byte, error) {
	ks := make([]json.RawMessage, 0, len(set.Keys))
	for _, k := range set.Keys {
		b, err := json.Marshal(k.JWK)
		if err != nil {
			return nil, fmt.Errorf("encode key %s: %w", k.ID, err)
		}
		ks = append(ks, b)
	}
	body, err := json.Marshal(struct {
		Keys []json.RawMessage `json:"keys"`
	}{ks})
	if err != nil {
		return nil, fmt.Errorf("encode key set: %w", err)
	}
	return body, nil
}
