// Package service assembles the directory service — the event store and
// projections of organizations, users, apps and IdPs, the public management
// API and the internal DirectoryService, and its background work (delivery
// of token revocations, pruning of failed-password counters) — so it can
// run as its own process (cmd/directory) or be mounted in-process by edge
// in the embedded mode.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/pkg/telemetry"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/api"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/authz"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/bootfile"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/bootstrap"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/cutoff"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/eventstore"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/internalapi"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/lockout"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/mail"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/management"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/orgs/domaincheck"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projections"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/projects"
	"github.com/gatehouse-id/gatehouse/services/directory/internal/users"
	"github.com/gatehouse-id/gatehouse/services/directory/migrations"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

// Tokens is what directory needs of the tokens service: checking
// management API access tokens, and the revocation of a user's tokens.
type Tokens interface {
	accesstoken.TokenAPI
	cutoff.Revoker
}

// Deps are the directory's dependencies on other services. A nil field is
// reached over the network at the configured URL.
type Deps struct {
	Tokens Tokens
}

// Service is the directory service.
type Service struct {
	db       *db.DB
	cutoffs  *cutoff.Outbox
	mail     *mail.Outbox
	tokens   *accesstoken.Remote
	stop     context.CancelFunc
	done     chan struct{}
	es       *eventstore.Store
	public   http.Handler
	handler  http.Handler
	internal *internalapi.Server
}

// New opens the service's storage (migrating it) and builds its handlers.
func New(ctx context.Context, env process.Env, deps Deps) (*Service, error) {
	cfg := env.Config
	boot, err := config.Get[*Settings](cfg)
	if err != nil {
		return nil, err
	}
	if deps.Tokens == nil {
		if cfg.TokensURL == nil {
			return nil, errors.New("directory needs the tokens service: set GATEHOUSE_TOKENS_URL")
		}
		opts, err := rpc.InternalClientOptions(cfg.InternalToken)
		if err != nil {
			return nil, err
		}
		deps.Tokens = tokensv1connect.NewTokenServiceClient(rpc.NewHTTPClient(), cfg.TokensURL.String(), opts...)
	}
	store, err := db.Open(ctx, db.Options{
		URL:        cfg.DatabaseURL,
		DataDir:    cfg.DataDir,
		Service:    "directory",
		Migrations: migrations.FS,
		Logger:     env.Logger,
		MaxConns:   cfg.DBMaxConns,
	})
	if err != nil {
		return nil, fmt.Errorf("directory storage: %w", err)
	}
	s := &Service{db: store}
	if err := users.RepairNormalizedNames(ctx, store, time.Now()); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("directory storage: %w", err)
	}
	if err := s.build(cfg.MasterKey, env, deps, *boot); err != nil {
		_ = store.Close()
		return nil, err
	}
	var applyFile func(context.Context, string) error
	if len(boot.BootstrapDocs) > 0 {
		applyFile = (&bootfile.Applier{Docs: boot.BootstrapDocs, API: s.public, DataDir: cfg.DataDir, Logger: env.Logger}).Apply
	}
	if err := bootstrap.Run(ctx, bootstrap.Options{
		ES: s.es, IssuerHost: cfg.Issuer.Hostname(), DataDir: cfg.DataDir, AdminPassword: boot.AdminPassword,
		PublicKey: boot.BootstrapPublicKey, Apply: applyFile,
		Console: os.Stderr, Logger: env.Logger, Now: time.Now,
	}); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("first start: %w", err)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop, s.done = stop, make(chan struct{})
	steps := append(append(lockout.PruneSteps(), users.PruneSteps()...), mail.PruneSteps()...)
	pruner := &db.Pruner{DB: store, Service: "directory", Steps: steps, Interval: cfg.PruneInterval, Logger: env.Logger}
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { s.cutoffs.Run(bg, cutoffRetry) })
		wg.Go(func() { s.tokens.Run(bg) })
		wg.Go(func() { pruner.Run(bg) })
		if s.mail != nil {
			wg.Go(func() { s.mail.Run(bg, mailPoll) })
		}
		wg.Wait()
	}()
	return s, nil
}

// cutoffRetry paces the background delivery of token revocations.
const cutoffRetry = 2 * time.Second

// mailPoll paces the mail outbox's rounds between kicks (another
// replica's messages, retries that came due).
const mailPoll = time.Second

// newMailOutbox builds the mail outbox: through the SMTP relay when one is
// configured; else, in the embedded server (one process on SQLite), as .eml files in
// the data folder; else none, and the features that send mail answer
// FailedPrecondition (mail.ErrUnavailable).
func newMailOutbox(d *db.DB, masterKey []byte, env process.Env, relay mail.Config) (*mail.Outbox, error) {
	cfg := env.Config
	var sender mail.Sender
	from := mail.NewFrom(cfg.Issuer)
	switch {
	case relay.Enabled():
		sender, from = mail.SMTP{Config: relay}, relay.From
	case cfg.Role == config.RoleEdge && cfg.DatabaseURL == "":
		sender = mail.Dir{Path: filepath.Join(cfg.DataDir, "mail")}
	default:
		env.Logger.Warn("mail: no relay (GATEHOUSE_SMTP_HOST): password reset, e-mail verification and invitations are off")
		return nil, nil
	}
	c, err := secrets.NewCipher(masterKey, secrets.PurposeMail)
	if err != nil {
		return nil, err
	}
	env.Logger.Info("mail: messages go to "+sender.Describe(), "from", from)
	return &mail.Outbox{DB: d, Sender: sender, Sealer: mail.Sealer{Cipher: c}, From: from, Host: cfg.Issuer.Hostname(), Logger: env.Logger}, nil
}

func (s *Service) build(masterKey []byte, env process.Env, deps Deps, set Settings) error {
	egress, err := config.Get[*config.IdPEgress](env.Config)
	if err != nil {
		return err
	}
	es := eventstore.New(s.db, time.Now)
	s.es = es
	projections.RegisterAll(es)
	idpCipher, err := secrets.NewCipher(masterKey, secrets.PurposeIdPSecrets)
	if err != nil {
		return err
	}
	hasher, err := secrets.NewHasher(masterKey)
	if err != nil {
		return err
	}
	factorCipher, err := secrets.NewCipher(masterKey, secrets.PurposeFactorSecrets)
	if err != nil {
		return err
	}
	factorSecrets := users.FactorSecrets{Cipher: factorCipher}
	// On an issuer whose host is an IP address wa is nil: WebAuthn does
	// not accept one, and the factor calls say so.
	wa, err := users.NewWebAuthn(env.Config.Issuer, "Gatehouse")
	if err != nil {
		return err
	}
	orgQ := &orgs.Queries{DB: s.db}
	userQ := &users.Queries{DB: s.db}
	s.cutoffs = &cutoff.Outbox{DB: s.db, Tokens: deps.Tokens, Logger: env.Logger}
	if s.mail, err = newMailOutbox(s.db, masterKey, env, set.Mail); err != nil {
		return err
	}
	var notices users.NoticeFunc
	if s.mail != nil {
		notices = users.MailNotices(s.mail.Sealer, func(ctx context.Context, orgID string) (string, error) {
			o, err := orgQ.Get(ctx, orgID)
			if err != nil {
				return "", err
			}
			return o.Name, nil
		})
	}
	mgmt := &management.Server{
		ES:         es,
		Orgs:       orgQ,
		OrgCmds:    &orgs.Commands{ES: es, IssuerHost: env.Config.Issuer.Hostname()},
		Users:      userQ,
		UserCmds:   &users.Commands{ES: es, Q: userQ, Notices: notices},
		IdPSecrets: idpCipher,
		Hasher:     hasher,
		Factors:    factorSecrets,
		WebAuthn:   wa,
		Issuer:     env.Config.Issuer,
		IdPEgress:  egress.Policy,
		Logger:     env.Logger,
		Now:        time.Now,
		Cutoffs:    s.cutoffs,
		Mail:       s.mail,
		// The HTTP check is an outbound call to a host a tenant names:
		// the identity providers' egress policy governs it.
		DomainCheck: domaincheck.Checker{HTTP: egress.Client(netguard.Options{}), Resolver: domaincheck.NewResolver(set.DNSResolver)},
	}
	otel, err := telemetry.ConnectInterceptor()
	if err != nil {
		return err
	}
	s.tokens = accesstoken.NewRemote(deps.Tokens, accesstoken.RemoteOptions{Issuer: env.Config.Issuer.String(),
		Audience: authz.Audience, MaxStale: env.Config.CacheMaxStale, Logger: env.Logger})
	azDir := authzDirectory{orgs: orgQ, users: userQ, projects: &projects.Queries{DB: s.db}}
	az := authz.NewInterceptor(s.tokens, azDir, management.Rules(), env.Logger)
	public, err := api.NewHandler(mgmt, env.Logger, otel, az)
	if err != nil {
		return err
	}
	s.public = public

	s.internal, err = internalapi.New(es, env.Logger, time.Now, idpCipher)
	if err != nil {
		return err
	}
	s.internal.Cutoffs = s.cutoffs
	s.internal.Dominance = func(ctx context.Context, actor, target string) (bool, error) {
		return authz.Dominates(ctx, azDir, actor, target)
	}
	s.internal.SetMail(internalapi.Mail{Outbox: s.mail, Issuer: env.Config.Issuer, Notices: notices})
	s.internal.Factors = internalapi.FactorKeys{Secrets: factorSecrets, Hasher: hasher, Issuer: env.Config.Issuer.Hostname(), WebAuthn: wa}
	if !s.db.CleanStart() {
		// The last process stopped without closing the SQLite data: the
		// TOTP steps it recorded last (relaxed writes) may be lost with a
		// crash of the machine, so their codes are refused for good.
		now := time.Now()
		s.internal.RefuseTOTPStepsUpTo(users.StepFloorAfter(now))
		env.Logger.Warn("directory: the database was not closed at the last stop; authenticator codes of the current time steps are refused (a code accepted just before the stop may not have reached the disk), the next codes work",
			"codes_work_from", time.Unix((users.StepFloorAfter(now)+1-users.TOTPSkew)*users.TOTPPeriod, 0).UTC())
	}
	iopts, err := rpc.InternalHandlerOptions(env.Config.InternalToken)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(directoryv1connect.NewDirectoryServiceHandler(s.internal, iopts...))
	mux.Handle("/", public)
	s.handler = mux
	return nil
}

// Details implements process.Detailer: whether management tokens are
// checked against a current revocation list.
func (s *Service) Details() map[string]any {
	return map[string]any{"revocationList": s.tokens.Status()}
}

// DirectoryService is the in-process internal API, for edge's embedded mode.
func (s *Service) DirectoryService() directoryv1connect.DirectoryServiceHandler { return s.internal }

// authzDirectory answers authz's questions from the projections.
type authzDirectory struct {
	orgs     *orgs.Queries
	users    *users.Queries
	projects *projects.Queries
}

func (d authzDirectory) Principal(ctx context.Context, userID string) (authz.Principal, error) {
	u, err := d.users.Get(ctx, userID)
	if err != nil {
		return authz.Principal{}, err
	}
	if u.State != users.StateActive {
		return authz.Principal{}, fmt.Errorf("user %s is not active: %w", userID, db.ErrNotFound)
	}
	return authz.Principal{OrgID: u.OrgID, CutAt: u.SessionsNotBefore}, nil
}

func (d authzDirectory) UserOrg(ctx context.Context, userID string) (string, error) {
	u, err := d.users.Get(ctx, userID)
	if err != nil {
		return "", err
	}
	return u.OrgID, nil
}

func (d authzDirectory) Memberships(ctx context.Context, userID string) ([]authz.Membership, error) {
	inst, err := d.orgs.InstanceRoles(ctx, userID)
	if err != nil {
		return nil, err
	}
	var out []authz.Membership
	if len(inst) > 0 {
		out = append(out, authz.Membership{Roles: inst})
	}
	ms, err := d.orgs.Memberships(ctx, userID)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		out = append(out, authz.Membership{OrgID: m.OrgID, Roles: m.Roles()})
	}
	return out, nil
}

func (d authzDirectory) AdminApp(ctx context.Context, orgID, appID string) (bool, error) {
	return d.projects.AdminApp(ctx, orgID, appID)
}

func (d authzDirectory) ManagementClient(ctx context.Context, userID, clientID string) (bool, error) {
	return d.projects.ManagementClient(ctx, userID, clientID)
}

func (d authzDirectory) OrgExists(ctx context.Context, orgID string) (bool, error) {
	_, err := d.orgs.Get(ctx, orgID)
	if errors.Is(err, db.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (d authzDirectory) Roles(ctx context.Context, userID, orgID string) ([]string, error) {
	return d.orgs.Roles(ctx, userID, orgID)
}

// PublicHandler serves the management API (REST, gRPC, gRPC-web, Connect).
func (s *Service) PublicHandler() http.Handler { return s.public }

// Handler serves public and internal routes on one port (standalone process).
func (s *Service) Handler() http.Handler { return s.handler }

// Checks are the dependencies of readiness.
func (s *Service) Checks() map[string]server.Check {
	return map[string]server.Check{"directory_db": s.db.Ping}
}

// Close stops the background delivery and pruning and releases the
// database.
func (s *Service) Close() error {
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	return s.db.Close()
}

var _ process.Component = (*Service)(nil)
