package service

import (
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/config"
)

// Settings are the tokens service's section of the configuration:
// signing and lifetimes (config.Get[*Settings]).
type Settings struct {
	SigningAlgorithm    string        // GATEHOUSE_SIGNING_ALGORITHM: RS256 (default), ES256 or EdDSA
	SigningLibrary      string        // GATEHOUSE_SIGNING_LIBRARY: auto (default: OpenSSL when it loads), openssl or go
	KeyRotationInterval time.Duration // GATEHOUSE_KEY_ROTATION_INTERVAL, default 6h
	AccessTokenLifetime time.Duration // GATEHOUSE_ACCESS_TOKEN_LIFETIME, default 12h
	IDTokenLifetime     time.Duration // GATEHOUSE_ID_TOKEN_LIFETIME, default 12h
	RefreshIdleLifetime time.Duration // GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME, default 720h (30 days)
	RefreshAbsLifetime  time.Duration // GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME, default 2160h (90 days)
	AuthCodeLifetime    time.Duration // GATEHOUSE_AUTH_CODE_LIFETIME, default 60s
	RefreshReuseGrace   time.Duration // GATEHOUSE_REFRESH_REUSE_GRACE, default 10s (0: none)
	DeviceCodeLifetime  time.Duration // GATEHOUSE_DEVICE_CODE_LIFETIME, default 600s (RFC 8628 device authorizations)
}

// Load implements config.Section.
func (s *Settings) Load(p *config.Parser, _ *config.Config) {
	*s = Settings{
		SigningAlgorithm:    p.Str("GATEHOUSE_SIGNING_ALGORITHM", "RS256"),
		SigningLibrary:      p.Str("GATEHOUSE_SIGNING_LIBRARY", "auto"),
		KeyRotationInterval: p.Duration("GATEHOUSE_KEY_ROTATION_INTERVAL", 6*time.Hour),
		AccessTokenLifetime: p.Duration("GATEHOUSE_ACCESS_TOKEN_LIFETIME", 12*time.Hour),
		IDTokenLifetime:     p.Duration("GATEHOUSE_ID_TOKEN_LIFETIME", 12*time.Hour),
		RefreshIdleLifetime: p.Duration("GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME", 30*24*time.Hour),
		RefreshAbsLifetime:  p.Duration("GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME", 90*24*time.Hour),
		AuthCodeLifetime:    p.Duration("GATEHOUSE_AUTH_CODE_LIFETIME", 60*time.Second),
		RefreshReuseGrace:   10 * time.Second,
		DeviceCodeLifetime:  p.Duration("GATEHOUSE_DEVICE_CODE_LIFETIME", 600*time.Second),
	}
	if p.Str("GATEHOUSE_REFRESH_REUSE_GRACE", "") != "" {
		s.RefreshReuseGrace = p.DurationOrZero("GATEHOUSE_REFRESH_REUSE_GRACE")
	}
	switch s.SigningAlgorithm {
	case "RS256", "ES256", "EdDSA":
	default:
		p.Fail("GATEHOUSE_SIGNING_ALGORITHM", "want RS256, ES256 or EdDSA, got %q", s.SigningAlgorithm)
	}
	switch s.SigningLibrary {
	case "auto", "openssl", "go":
	default:
		p.Fail("GATEHOUSE_SIGNING_LIBRARY", "want auto, openssl or go, got %q", s.SigningLibrary)
	}
	if s.RefreshIdleLifetime > s.RefreshAbsLifetime {
		p.Fail("GATEHOUSE_REFRESH_TOKEN_IDLE_LIFETIME", "must not exceed GATEHOUSE_REFRESH_TOKEN_ABSOLUTE_LIFETIME")
	}
	if s.DeviceCodeLifetime < time.Minute || s.DeviceCodeLifetime > time.Hour {
		// Shorter leaves a person no time to sign in; longer keeps a
		// guessable user code alive for too long (RFC 8628 §5.1).
		p.Fail("GATEHOUSE_DEVICE_CODE_LIFETIME", "must be between 1m and 1h")
	}
	if s.KeyRotationInterval < 10*time.Minute {
		p.Fail("GATEHOUSE_KEY_ROTATION_INTERVAL", "must be at least 10m (keys are published minutes before they sign)")
	}
}
