package service

import (
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// Settings are the authn service's section of the configuration: its
// browser (SSO) sessions (config.Get[*Settings]; the identity providers'
// egress is config.IdPEgress, shared with directory).
//
// A session answers authorization requests without a login only while
// both lifetimes hold: IdleLifetime since its last activity (its sign-in,
// or an authorization request it answered) and AbsoluteLifetime since its
// user last authenticated.
//
// The idle default is longer than Keycloak's 30 minutes on purpose:
// Keycloak also counts every refresh token request as activity, and its
// access tokens live 5 minutes, so an active user touches the session all
// the time. Here only authorization requests reach the session (refresh
// tokens are offline_access tokens of the tokens service, and access
// tokens live 12h), so with 30 minutes a user who opens a second
// application an hour after the first would have to sign in again. Two
// hours keeps single sign-on across a working day's pauses; the absolute
// 10 hours (Keycloak's) still ends every session within a day. Password
// sign-in is NIST SP 800-63B AAL1, which sets no inactivity limit and
// 30 days overall; AAL2 deployments set the idle lifetime to 30m.
type Settings struct {
	IdleLifetime     time.Duration // GATEHOUSE_SESSION_IDLE_LIFETIME, default 2h
	AbsoluteLifetime time.Duration // GATEHOUSE_SESSION_ABSOLUTE_LIFETIME, default 10h
	// Retention (GATEHOUSE_SESSION_RETENTION, default 24h): how long an
	// ended or expired session, and a browser without one, is kept.
	Retention time.Duration
}

// Load implements config.Section.
func (s *Settings) Load(p *config.Parser, _ *config.Config) {
	*s = Settings{
		IdleLifetime:     p.Duration("GATEHOUSE_SESSION_IDLE_LIFETIME", 2*time.Hour),
		AbsoluteLifetime: p.Duration("GATEHOUSE_SESSION_ABSOLUTE_LIFETIME", 10*time.Hour),
		Retention:        p.Duration("GATEHOUSE_SESSION_RETENTION", 24*time.Hour),
	}
	if s.IdleLifetime > s.AbsoluteLifetime {
		p.Fail("GATEHOUSE_SESSION_IDLE_LIFETIME", "must not exceed GATEHOUSE_SESSION_ABSOLUTE_LIFETIME")
	}
}
