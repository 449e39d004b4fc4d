// Package service assembles the tokens service — signing keys, discovery,
// the token, introspection, revocation and userinfo endpoints, and the
// internal TokenService — so it can run as its own process (cmd/tokens) or
// be mounted in-process by edge in the embedded mode.
package service

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// Service is the tokens service.
type Service struct {
	db       *db.DB
	public   *http.ServeMux
	internal *internalAPI
}

// New opens the service's storage (migrating it) and builds its handlers.
func New(ctx context.Context, env process.Env) (*Service, error) {
	store, err := db.Open(ctx, db.Options{
		URL:        env.Config.DatabaseURL,
		DataDir:    env.Config.DataDir,
		Service:    "tokens",
		Migrations: migrations.FS,
		Logger:     env.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("tokens storage: %w", err)
	}
	return &Service{db: store, public: http.NewServeMux(), internal: &internalAPI{}}, nil
}

// PublicHandler serves the tokens service's public routes (see DESIGN.md).
func (s *Service) PublicHandler() http.Handler { return s.public }

// Handler serves public and internal routes on one port (standalone process).
func (s *Service) Handler() http.Handler { return s.public }

// Checks are the dependencies of readiness.
func (s *Service) Checks() map[string]server.Check {
	return map[string]server.Check{"tokens_db": s.db.Ping}
}

// Close releases the database.
func (s *Service) Close() error { return s.db.Close() }

var _ process.Component = (*Service)(nil)
