package service

import (
	"net/netip"

	"github.com/gatehouse-id/gatehouse/pkg/config"
	authnsvc "github.com/gatehouse-id/gatehouse/services/authn/service"
	directorysvc "github.com/gatehouse-id/gatehouse/services/directory/service"
	tokenssvc "github.com/gatehouse-id/gatehouse/services/tokens/service"
)

// Settings are edge's section of the configuration: who it trusts for
// client addresses and its rate limits (config.Get[*Settings]).
type Settings struct {
	TrustedProxies []netip.Prefix // GATEHOUSE_TRUSTED_PROXIES, comma-separated CIDRs
	// RateLimit and RateBurst are GATEHOUSE_RATE_LIMIT and
	// GATEHOUSE_RATE_BURST: requests per second and burst per client
	// address for the browser class at edge (pages, and paths not routed).
	// RateLimit 0 turns rate limiting off for every class.
	RateLimit float64
	RateBurst int
	// ClientRate is GATEHOUSE_RATE_LIMIT_CLIENT and _BURST_CLIENT: per
	// OAuth client at the token, introspection and revocation endpoints.
	ClientRate RateBudget
	// APIRate is GATEHOUSE_RATE_LIMIT_API and _BURST_API: per bearer
	// token at userinfo and the management and admin APIs.
	APIRate RateBudget
	// AddressCapRate is GATEHOUSE_RATE_LIMIT_ADDRESS_CAP and
	// _BURST_ADDRESS_CAP: per client address, over the requests of the
	// client and API classes that name a client or a token, which edge
	// cannot verify.
	AddressCapRate RateBudget
	// PasswordRate is GATEHOUSE_RATE_LIMIT_PASSWORD and _BURST_PASSWORD
	// (a tenth of RateLimit and a fifth of RateBurst unless set): per
	// client address, over the login pages' submissions that hash a
	// password (each costs one argon2id hash, of which a server runs only
	// a few at once), besides the browser budget.
	PasswordRate RateBudget
	// RateLimitFallback is GATEHOUSE_RATE_LIMIT_FALLBACK: what limits while
	// Redis is unreachable, "memory" (each replica in process) or "open".
	RateLimitFallback string
}

// Sections are the configuration sections of the edge process: its own,
// and those of the services it embeds (each one whose URL is unset), read
// before any starts, so one line lists every invalid variable and another
// process's variable never stops this one.
var Sections = config.Sections(func(core *config.Config) []config.Section {
	out := []config.Section{&Settings{}}
	if core.DirectoryURL == nil {
		out = append(out, &directorysvc.Settings{}, &config.IdPEgress{})
	}
	if core.TokensURL == nil {
		// IdPEgress: tokens posts back-channel logouts under it.
		out = append(out, &tokenssvc.Settings{}, &config.IdPEgress{})
	}
	if core.AuthnURL == nil {
		out = append(out, &authnsvc.Settings{}, &config.IdPEgress{})
	}
	return out
})

// RateBudget is one rate limit: requests per second on average and how
// many may pass at once. PerSecond 0 means no limit.
type RateBudget struct {
	PerSecond float64
	Burst     int
}

// Load implements config.Section.
func (s *Settings) Load(p *config.Parser, _ *config.Config) {
	s.TrustedProxies = p.Prefixes("GATEHOUSE_TRUSTED_PROXIES")
	s.RateLimit = p.Float("GATEHOUSE_RATE_LIMIT", 50)
	s.RateBurst = p.Int("GATEHOUSE_RATE_BURST", 100)
	// A class left unset never gets less than GATEHOUSE_RATE_LIMIT and
	// _BURST, which bounded every route before classes existed: an
	// instance that raised them for a busy backend keeps that budget.
	shared := RateBudget{s.RateLimit, s.RateBurst}
	s.ClientRate = rateBudget(p, "CLIENT", RateBudget{200, 400}, shared)
	s.APIRate = rateBudget(p, "API", RateBudget{100, 200}, shared)
	s.AddressCapRate = rateBudget(p, "ADDRESS_CAP", RateBudget{1000, 2000}, shared)
	// A tenth of the browser budget's rate and a fifth of its burst (5/s
	// and 20 by default), not floored by it: it is meant to be smaller.
	s.PasswordRate = rateBudget(p, "PASSWORD", RateBudget{s.RateLimit / 10, max(s.RateBurst/5, 1)}, RateBudget{})
	switch s.RateLimitFallback = p.Str("GATEHOUSE_RATE_LIMIT_FALLBACK", "memory"); s.RateLimitFallback {
	case "memory", "open":
	default:
		p.Fail("GATEHOUSE_RATE_LIMIT_FALLBACK", "want memory or open, got %q", s.RateLimitFallback)
	}
}

// rateBudget reads GATEHOUSE_RATE_LIMIT_<class> and
// GATEHOUSE_RATE_BURST_<class>; each one unset is the larger of def's and
// floor's.
func rateBudget(p *config.Parser, class string, def, floor RateBudget) RateBudget {
	return RateBudget{
		PerSecond: p.Float("GATEHOUSE_RATE_LIMIT_"+class, max(def.PerSecond, floor.PerSecond)),
		Burst:     p.Int("GATEHOUSE_RATE_BURST_"+class, max(def.Burst, floor.Burst)),
	}
}
