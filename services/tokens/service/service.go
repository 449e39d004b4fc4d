// Package service assembles the tokens service — signing keys, discovery,
// the token, introspection, revocation and userinfo endpoints, the admin
// API and the internal TokenService — so it can run as its own process
// (cmd/tokens) or be mounted in-process by edge in the embedded mode.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/admin"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/assertion"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/backchannel"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/device"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/discovery"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/grants"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/jwks"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revocation"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/revoke"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/userinfo"
	"github.com/gatehouse-id/gatehouse/services/tokens/migrations"
)

// Directory is what tokens needs of the directory's internal API.
type Directory interface {
	GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error)
	GetMachineKey(context.Context, *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error)
	GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error)
	GetRoles(context.Context, *directoryv1.GetRolesRequest) (*directoryv1.GetRolesResponse, error)
	GetClaims(context.Context, *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error)
	ListChanges(context.Context, *directoryv1.ListChangesRequest) (*directoryv1.ListChangesResponse, error)
	AuthorizeTokenExchange(context.Context, *directoryv1.AuthorizeTokenExchangeRequest) (*directoryv1.AuthorizeTokenExchangeResponse, error)
}

// cachedDirectory is the directory with machine keys read through the
// cache.
type cachedDirectory struct {
	Directory
	keys   *clients.KeyCache
	claims *clients.ClaimsCache
}

func (d cachedDirectory) GetClaims(ctx context.Context, req *directoryv1.GetClaimsRequest) (*directoryv1.GetClaimsResponse, error) {
	return d.claims.GetClaims(ctx, req)
}

func (d cachedDirectory) GetMachineKey(ctx context.Context, req *directoryv1.GetMachineKeyRequest) (*directoryv1.GetMachineKeyResponse, error) {
	return d.keys.GetMachineKey(ctx, req)
}

// Deps are the tokens service's dependencies on other services. A nil
// field is reached over the network at the configured URL.
type Deps struct {
	Directory Directory
}

// Service is the tokens service.
type Service struct {
	db       *db.DB
	keys     *keys.Manager
	revoked  *revocation.List
	watcher  *dircache.Watcher
	public   *http.ServeMux
	handler  http.Handler
	internal *internalAPI
	stop     context.CancelFunc
	done     chan struct{}
	closers  []func() error
}

// New opens the service's storage (migrating it), loads or creates the
// signing keys and builds its handlers.
func New(ctx context.Context, env process.Env, deps Deps) (_ *Service, err error) {
	cfg := env.Config
	t, err := config.Get[*Settings](cfg)
	if err != nil {
		return nil, err
	}
	// Back-channel logout URIs are registered by app owners: they may
	// reach only what identity providers may (pkg/netguard).
	egress, err := config.Get[*config.IdPEgress](cfg)
	if err != nil {
		return nil, err
	}
	if deps.Directory == nil {
		if cfg.DirectoryURL == nil {
			return nil, errors.New("tokens needs the directory service: set GATEHOUSE_DIRECTORY_URL")
		}
		opts, err := rpc.InternalClientOptions(cfg.InternalToken)
		if err != nil {
			return nil, err
		}
		deps.Directory = directoryv1connect.NewDirectoryServiceClient(rpc.NewHTTPClient(), cfg.DirectoryURL.String(), opts...)
	}
	st, err := db.Open(ctx, db.Options{
		URL:        cfg.DatabaseURL,
		DataDir:    cfg.DataDir,
		Service:    "tokens",
		Migrations: migrations.FS,
		Logger:     env.Logger,
		MaxConns:   cfg.DBMaxConns,
	})
	if err != nil {
		return nil, fmt.Errorf("tokens storage: %w", err)
	}
	s := &Service{db: st, public: http.NewServeMux()}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	s.keys, err = keys.New(ctx, st, keys.Options{
		Algorithm:        t.SigningAlgorithm,
		Library:          t.SigningLibrary,
		RotationInterval: t.KeyRotationInterval,
		MaxTokenLifetime: max(t.AccessTokenLifetime, t.IDTokenLifetime),
		MasterKey:        cfg.MasterKey,
		Logger:           env.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("signing keys: %w", err)
	}
	lib, version := s.keys.Library()
	if err := telemetry.Info("gatehouse.tokens.signing_library", "What signs RS256 and ES256 tokens: openssl or go, with its version (value 1).",
		attribute.String("library", lib), attribute.String("version", version)); err != nil {
		return nil, err
	}
	s.revoked, err = revocation.New(st, revocation.Options{RedisURL: cfg.RedisURL, Logger: env.Logger, Now: time.Now, PruneInterval: cfg.PruneInterval})
	if err != nil {
		return nil, fmt.Errorf("revocation list: %w", err)
	}
	hasher, err := secrets.NewHasher(cfg.MasterKey)
	if err != nil {
		return nil, err
	}
	issuer := cfg.Issuer.String()
	records := &store.Store{DB: st}
	// Client assertions may name the issuer or the endpoint they are sent to.
	verifier := &assertion.Verifier{Audiences: []string{issuer, issuer + "/oauth/v2/token", issuer + introspection.Path, issuer + revoke.Path,
		issuer + device.Path, issuer + "/oauth/v2/par"},
		Replay: records, Now: time.Now}
	minter := &mint.Minter{Issuer: issuer, Signer: s.keys, Hasher: hasher, Store: records,
		AccessTTL: t.AccessTokenLifetime, IDTTL: t.IDTokenLifetime, Now: time.Now}
	validator := introspection.NewVerifier(issuer, s.keys, records, hasher, s.revoked, time.Now)
	// Clients and machine keys stay available through a directory outage.
	s.watcher = &dircache.Watcher{Feed: deps.Directory, MaxStale: cfg.CacheMaxStale, Logger: env.Logger}
	if err := s.watcher.Metrics(dircache.TokensMetric); err != nil {
		return nil, err
	}
	dir := cachedDirectory{Directory: deps.Directory, keys: clients.NewKeyCache(deps.Directory, s.watcher),
		claims: clients.NewClaimsCache(deps.Directory, s.watcher)}
	auth := &clients.Authenticator{
		Cache:      clients.NewCache(deps.Directory, s.watcher),
		Hasher:     hasher,
		Assertions: verifier,
		// A request object names the issuer alone as its audience (RFC
		// 9101 §4); its jti shares the assertions' replay store.
		RequestObjects: &assertion.Verifier{Audiences: []string{issuer}, Replay: records, Now: time.Now, NoSubject: true},
		Machines:       dir,
	}
	proofs, err := s.dpopVerifier(ctx, cfg, st, records, env.Logger)
	if err != nil {
		return nil, err
	}
	life := &lifecycle.Lifecycle{Issuer: issuer, Store: records, Minter: minter, Hasher: hasher, Revoked: s.revoked,
		Keys: s.keys, Dir: deps.Directory, Clients: auth.Cache, CodeTTL: t.AuthCodeLifetime, RefreshIdle: t.RefreshIdleLifetime,
		RefreshAbs: t.RefreshAbsLifetime, ReuseGrace: t.RefreshReuseGrace, DeviceTTL: t.DeviceCodeLifetime, Now: time.Now, Logger: env.Logger,
		AccessTokens: validator, Exchanges: deps.Directory}
	logouts := &backchannel.Outbox{Issuer: issuer, Store: records, Clients: auth.Cache, Signer: s.keys,
		HTTP: backchannel.NewHTTPClient(egress.Policy), Now: time.Now, Logger: env.Logger}
	life.Logouts = logouts

	keySet := jwks.NewHandler(s.keys, s.keys.KeySetMaxAge(), env.Logger)
	s.public.Handle(jwks.Path, keySet)
	s.public.Handle(discovery.Path, discovery.NewHandlerFor(issuer, s.keys.DefaultAlgorithm(), cfg.RequirePAR, s.keys, env.Logger))
	s.public.Handle("/oauth/v2/token", grants.New(grants.Deps{Auth: auth, Minter: minter, Dir: dir, Assertions: verifier, Lifecycle: life,
		Cuts: s.revoked, DPoP: proofs, URL: issuer + "/oauth/v2/token"}, env.Logger))
	s.public.Handle(device.Path, &device.Endpoint{Issuer: issuer, Auth: auth, Start: life, Logger: env.Logger})
	s.public.Handle(introspection.Path, introspection.NewEndpoint(validator, auth, dir, env.Logger))
	ui := userinfo.New(validator, dir, env.Logger)
	ui.DPoP, ui.URL = proofs, issuer+userinfo.Path
	s.public.Handle(userinfo.Path, ui)
	rv, err := revoke.New(auth, validator, s.revoked, life, env.Logger)
	if err != nil {
		return nil, err
	}
	rv.Exchanged = life
	s.public.Handle(revoke.Path, rv)
	otel, err := telemetry.ConnectInterceptor()
	if err != nil {
		return nil, err
	}
	ah, err := admin.NewHandler(s.keys, &adminAuthorizer{tokens: validator, dir: deps.Directory}, env.Logger, otel)
	if err != nil {
		return nil, err
	}
	for _, p := range admin.Paths {
		s.public.Handle(p, ah)
	}

	s.internal = &internalAPI{validator: validator, life: life, revoked: s.revoked, keySet: keySet, clients: auth,
		dpop: proofs, parURL: issuer + "/oauth/v2/par"}
	iopts, err := rpc.InternalHandlerOptions(cfg.InternalToken)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(tokensv1connect.NewTokenServiceHandler(s.internal, iopts...))
	mux.Handle("/", s.public)
	s.handler = mux

	// Background work lives as long as the service, not the start context.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop, s.done = stop, make(chan struct{})
	s.keys.Start(bg)
	// A session's apps are remembered while one may hold a token of it.
	steps := append(store.PruneSteps(life.CodeGrace()),
		store.LogoutPruneSteps(max(t.RefreshAbsLifetime, t.AccessTokenLifetime, t.IDTokenLifetime), backchannel.GiveUp+time.Hour)...)
	pruner := &db.Pruner{DB: s.db, Service: "tokens", Steps: steps, Interval: cfg.PruneInterval, Logger: env.Logger}
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { s.revoked.Run(bg) })
		wg.Go(func() { pruner.Run(bg) })
		wg.Go(func() { s.watcher.Run(bg) })
		wg.Go(func() { logouts.Run(bg) })
		wg.Wait()
	}()
	return s, nil
}

// PublicHandler serves the tokens service's public routes (see DESIGN.md).
func (s *Service) PublicHandler() http.Handler { return s.public }

// Handler serves public and internal routes on one port (standalone process).
func (s *Service) Handler() http.Handler { return s.handler }

// TokenService is the in-process internal API, for edge's embedded mode.
func (s *Service) TokenService() tokensv1connect.TokenServiceHandler { return s.internal }

// Checks are the dependencies of readiness.
func (s *Service) Checks() map[string]server.Check {
	return map[string]server.Check{"tokens_db": s.db.Ping, "tokens_signing_keys": s.keys.Ready}
}

// Close stops background work and releases the database.
func (s *Service) Close() error {
	var errs []error
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	if s.keys != nil {
		s.keys.Stop()
	}
	if s.revoked != nil {
		errs = append(errs, s.revoked.Close())
	}
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	errs = append(errs, s.db.Close())
	return errors.Join(errs...)
}

var _ process.Component = (*Service)(nil)
