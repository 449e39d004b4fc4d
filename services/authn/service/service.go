// Package service assembles the authn service — the authorization endpoint,
// the login pages, browser sessions and end_session — so it can run as its
// own process (cmd/authn) or be mounted in-process by edge in the embedded mode.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	"github.com/gatehouse-id/gatehouse/pkg/db"
	"github.com/gatehouse-id/gatehouse/pkg/dircache"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1/directoryv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1/tokensv1connect"
	"github.com/gatehouse-id/gatehouse/pkg/netguard"
	"github.com/gatehouse-id/gatehouse/pkg/process"
	"github.com/gatehouse-id/gatehouse/pkg/rpc"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/pkg/server"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/authorize"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/endsession"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/federation"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/login"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
	"github.com/gatehouse-id/gatehouse/services/authn/migrations"
)

// Directory is what authn needs of the directory's internal API.
type Directory interface {
	GetClient(context.Context, *directoryv1.GetClientRequest) (*directoryv1.GetClientResponse, error)
	GetOrg(context.Context, *directoryv1.GetOrgRequest) (*directoryv1.GetOrgResponse, error)
	GetUser(context.Context, *directoryv1.GetUserRequest) (*directoryv1.GetUserResponse, error)
	VerifyPassword(context.Context, *directoryv1.VerifyPasswordRequest) (*directoryv1.VerifyPasswordResponse, error)
	ChangePassword(context.Context, *directoryv1.ChangePasswordRequest) (*directoryv1.ChangePasswordResponse, error)
	RegisterUser(context.Context, *directoryv1.RegisterUserRequest) (*directoryv1.RegisterUserResponse, error)
	LookupUser(context.Context, *directoryv1.LookupUserRequest) (*directoryv1.LookupUserResponse, error)
	GetIdP(context.Context, *directoryv1.GetIdPRequest) (*directoryv1.GetIdPResponse, error)
	ListIdPs(context.Context, *directoryv1.ListIdPsRequest) (*directoryv1.ListIdPsResponse, error)
	GetLinkedUser(context.Context, *directoryv1.GetLinkedUserRequest) (*directoryv1.GetLinkedUserResponse, error)
	RegisterExternalUser(context.Context, *directoryv1.RegisterExternalUserRequest) (*directoryv1.RegisterExternalUserResponse, error)
	LinkExternalUser(context.Context, *directoryv1.LinkExternalUserRequest) (*directoryv1.LinkExternalUserResponse, error)
	ListAuthFactors(context.Context, *directoryv1.ListAuthFactorsRequest) (*directoryv1.ListAuthFactorsResponse, error)
	CheckAuthFactor(context.Context, *directoryv1.CheckAuthFactorRequest) (*directoryv1.CheckAuthFactorResponse, error)
	StartTOTP(context.Context, *directoryv1.StartTOTPRequest) (*directoryv1.StartTOTPResponse, error)
	VerifyTOTP(context.Context, *directoryv1.VerifyTOTPRequest) (*directoryv1.VerifyTOTPResponse, error)
	GenerateRecoveryCodes(context.Context, *directoryv1.GenerateRecoveryCodesRequest) (*directoryv1.GenerateRecoveryCodesResponse, error)
	StartWebAuthnLogin(context.Context, *directoryv1.StartWebAuthnLoginRequest) (*directoryv1.StartWebAuthnLoginResponse, error)
	CheckWebAuthnLogin(context.Context, *directoryv1.CheckWebAuthnLoginRequest) (*directoryv1.CheckWebAuthnLoginResponse, error)
	StartWebAuthnRegistration(context.Context, *directoryv1.StartWebAuthnRegistrationRequest) (*directoryv1.StartWebAuthnRegistrationResponse, error)
	VerifyWebAuthnRegistration(context.Context, *directoryv1.VerifyWebAuthnRegistrationRequest) (*directoryv1.VerifyWebAuthnRegistrationResponse, error)
	GetAccount(context.Context, *directoryv1.GetAccountRequest) (*directoryv1.GetAccountResponse, error)
	RemoveAccountFactor(context.Context, *directoryv1.RemoveAccountFactorRequest) (*directoryv1.RemoveAccountFactorResponse, error)
	UnlinkAccount(context.Context, *directoryv1.UnlinkAccountRequest) (*directoryv1.UnlinkAccountResponse, error)
	EndUserSessions(context.Context, *directoryv1.EndUserSessionsRequest) (*directoryv1.EndUserSessionsResponse, error)
	RequestPasswordReset(context.Context, *directoryv1.RequestPasswordResetRequest) (*directoryv1.RequestPasswordResetResponse, error)
	CheckPasswordResetCode(context.Context, *directoryv1.CheckPasswordResetCodeRequest) (*directoryv1.CheckPasswordResetCodeResponse, error)
	ResetPassword(context.Context, *directoryv1.ResetPasswordRequest) (*directoryv1.ResetPasswordResponse, error)
	CheckUserCode(context.Context, *directoryv1.CheckUserCodeRequest) (*directoryv1.CheckUserCodeResponse, error)
	VerifyEmailCode(context.Context, *directoryv1.VerifyEmailCodeRequest) (*directoryv1.VerifyEmailCodeResponse, error)
	InitializeUser(context.Context, *directoryv1.InitializeUserRequest) (*directoryv1.InitializeUserResponse, error)
	SendEmailCode(context.Context, *directoryv1.SendEmailCodeRequest) (*directoryv1.SendEmailCodeResponse, error)
	ConfirmLinkedEmail(context.Context, *directoryv1.ConfirmLinkedEmailRequest) (*directoryv1.ConfirmLinkedEmailResponse, error)
}

// DirectoryWithFeed is Directory and the change feed that keeps authn's
// cache of clients and organizations current (see cachedDirectory).
type DirectoryWithFeed interface {
	Directory
	ListChanges(context.Context, *directoryv1.ListChangesRequest) (*directoryv1.ListChangesResponse, error)
}

// Deps are the authn service's dependencies on other services. A nil
// field is reached over the network at the configured URL.
type Deps struct {
	Directory DirectoryWithFeed
	Tokens    Tokens
}

// RequestTTL is how long a pending authorization request waits for the
// user to sign in.
const RequestTTL = 30 * time.Minute

// Service is the authn service.
type Service struct {
	db     *db.DB
	public *http.ServeMux
	stop   context.CancelFunc
	done   chan struct{}
}

// New opens the service's storage (migrating it) and builds its handlers.
func New(ctx context.Context, env process.Env, deps Deps) (_ *Service, err error) {
	cfg := env.Config
	sessions, err := config.Get[*Settings](cfg)
	if err != nil {
		return nil, err
	}
	egress, err := config.Get[*config.IdPEgress](cfg)
	if err != nil {
		return nil, err
	}
	masterKey, err := cfg.LoadMasterKey() // as process.Run has (tests call New directly)
	if err != nil {
		return nil, err
	}
	lifetimes := session.Lifetimes{Idle: sessions.IdleLifetime, Absolute: sessions.AbsoluteLifetime, Retention: sessions.Retention}
	if deps.Directory == nil || deps.Tokens == nil {
		opts, err := rpc.InternalClientOptions(cfg.InternalToken)
		if err != nil {
			return nil, err
		}
		if deps.Directory == nil {
			if cfg.DirectoryURL == nil {
				return nil, errors.New("authn needs the directory service: set GATEHOUSE_DIRECTORY_URL")
			}
			deps.Directory = directoryv1connect.NewDirectoryServiceClient(rpc.NewHTTPClient(), cfg.DirectoryURL.String(), opts...)
		}
		if deps.Tokens == nil {
			if cfg.TokensURL == nil {
				return nil, errors.New("authn needs the tokens service: set GATEHOUSE_TOKENS_URL")
			}
			deps.Tokens = tokensv1connect.NewTokenServiceClient(rpc.NewHTTPClient(), cfg.TokensURL.String(), opts...)
		}
	}
	if egress.AllowPrivate {
		env.Logger.WarnContext(ctx, "GATEHOUSE_IDP_DENY_PRIVATE=false is deprecated: it lets identity provider calls reach every private address; list on-premises providers in GATEHOUSE_IDP_ALLOW instead")
	}
	store, err := db.Open(ctx, db.Options{
		URL:        cfg.DatabaseURL,
		DataDir:    cfg.DataDir,
		Service:    "authn",
		Migrations: migrations.FS,
		Logger:     env.Logger,
		MaxConns:   cfg.DBMaxConns,
	})
	if err != nil {
		return nil, fmt.Errorf("authn storage: %w", err)
	}
	s := &Service{db: store}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	// Clients, organizations and their identity provider lists, read at
	// every sign-in, come from memory the directory's change feed keeps
	// current.
	watcher := &dircache.Watcher{Feed: deps.Directory, MaxStale: cfg.CacheMaxStale, Logger: env.Logger}
	if err := watcher.Metrics(dircache.AuthnMetric); err != nil {
		return nil, err
	}
	s.public, err = NewHandler(HandlerOptions{
		DB: store, Directory: newCachedDirectory(deps.Directory, watcher), Tokens: deps.Tokens,
		SecureCookies: cfg.Issuer.Scheme == "https", Issuer: strings.TrimRight(cfg.Issuer.String(), "/"), Now: time.Now, Logger: env.Logger,
		IdPHTTP:    egress.Client(netguard.Options{}),
		Sessions:   lifetimes,
		RequirePAR: cfg.RequirePAR,
		MasterKey:  masterKey,
	})
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop, s.done = stop, make(chan struct{})
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { watcher.Run(bg) })
		(&db.Pruner{DB: store, Service: "authn", Steps: session.PruneSteps(lifetimes), Interval: env.Config.PruneInterval, Logger: env.Logger}).Run(bg)
		wg.Wait()
	}()
	return s, nil
}

// HandlerOptions are what NewHandler wires.
type HandlerOptions struct {
	DB            *db.DB
	Directory     Directory
	Tokens        Tokens
	SecureCookies bool
	// Issuer goes into every authorization response as iss (RFC 9207).
	Issuer string
	// IdPHTTP makes the calls to external identity providers (a netguard
	// client; nil: the default policy, loopback refused).
	IdPHTTP *http.Client
	// Sessions are the browser sessions' lifetimes (zero fields: the
	// defaults, session.DefaultLifetimes).
	Sessions session.Lifetimes
	// RequirePAR refuses authorization requests that were not pushed
	// first (GATEHOUSE_REQUIRE_PAR).
	RequirePAR bool
	// MasterKey seals the state the login pages' forms carry (required).
	MasterKey []byte
	Now       func() time.Time
	Logger    *slog.Logger
}

// NewHandler builds authn's public routes on an open, migrated database
// (the service uses it; tests use it with fakes of the other services).
func NewHandler(o HandlerOptions) (*http.ServeMux, error) {
	store := &session.Store{DB: o.DB, Lifetimes: o.Sessions}
	browsers := &session.Browsers{Store: store, Secure: o.SecureCookies, Name: session.CookieNameFor(o.Issuer, o.SecureCookies), Now: o.Now}
	tokens := tokensAdapter{c: o.Tokens}
	log := o.Logger
	flow := &authorize.Flow{
		Validator: &authorize.Validator{Directory: o.Directory, Tokens: tokens, Issuer: o.Issuer, Pushed: store,
			RequirePAR: o.RequirePAR, Now: o.Now},
		Directory: o.Directory, Tokens: tokens, Store: store, Browsers: browsers,
		RequestTTL: RequestTTL, Now: o.Now, Logger: log,
	}
	idpHTTP := o.IdPHTTP
	if idpHTTP == nil {
		idpHTTP = netguard.Policy{}.Client(netguard.Options{})
	}
	rp := &federation.RP{HTTP: idpHTTP, RedirectURL: o.Issuer + login.PathIdPCallback, Now: o.Now}
	stateKey, err := secrets.NewCipher(o.MasterKey, secrets.PurposeLoginState)
	if err != nil {
		return nil, fmt.Errorf("login state key: %w", err)
	}
	pages, err := login.New(login.Pages{Flow: flow, Directory: o.Directory, Store: store, Browsers: browsers, RP: rp,
		WebAuthn: webAuthnWorks(o.Issuer), StateKey: stateKey, Now: o.Now, Logger: log})
	if err != nil {
		return nil, err
	}
	flow.ErrorPage = pages.ErrorPage
	flow.StartIdP = pages.BeginIdP
	mux := http.NewServeMux()
	mux.Handle(authorize.Path, flow)
	mux.Handle(authorize.PathPAR, &authorize.PAREndpoint{Validator: flow.Validator, Logger: log})
	pages.Register(mux)
	mux.Handle(endsession.Path, &endsession.Handler{
		Directory: o.Directory, Tokens: tokens, Store: store, Browsers: browsers,
		ErrorPage: pages.ErrorPage, LoggedOut: pages.LoggedOut, Confirm: pages.ConfirmLogout, Now: o.Now, Logger: log,
	})
	return mux, nil
}

// webAuthnWorks reports whether security keys and passkeys work on
// issuer: WebAuthn does not accept an IP address as relying party id.
func webAuthnWorks(issuer string) bool {
	u, err := url.Parse(issuer)
	return err == nil && u.Hostname() != "" && net.ParseIP(u.Hostname()) == nil
}

// PublicHandler serves the authn service's public routes (see DESIGN.md).
func (s *Service) PublicHandler() http.Handler { return s.public }

// Handler serves public and internal routes on one port (standalone process).
func (s *Service) Handler() http.Handler { return s.public }

// Checks are the dependencies of readiness.
func (s *Service) Checks() map[string]server.Check {
	return map[string]server.Check{"authn_db": s.db.Ping}
}

// Close stops background work and releases the database.
func (s *Service) Close() error {
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	return s.db.Close()
}

var _ process.Component = (*Service)(nil)
