// Package kind names what an opaque Gatehouse token is by a short prefix,
// as fosite's ory_at_: gatehouse_at_ (access token), gatehouse_rt_
// (refresh token), gatehouse_ac_ (authorization code), gatehouse_dc_
// (device code). A secret scanner
// recognises a leaked Gatehouse token by it, and the tokens service knows
// the kind before a lookup: a token whose prefix names another kind is
// refused without touching the store. The prefix is part of the token's
// text, and of what its record is keyed by (the HMAC covers it), so a
// token has one spelling only. Tokens issued before prefixes (none) are
// still looked up as before, until they expire.
package kind

import (
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/secrets"
)

// Kind is what an opaque token is.
type Kind int

// Kinds.
const (
	// Unknown: no prefix (a JWT, or a token issued before prefixes).
	Unknown Kind = iota
	AccessToken
	RefreshToken
	AuthorizationCode
	DeviceCode
)

// Prefixes.
const (
	AccessPrefix  = "gatehouse_at_"
	RefreshPrefix = "gatehouse_rt_"
	CodePrefix    = "gatehouse_ac_"
	DevicePrefix  = "gatehouse_dc_"
)

// NewAccessToken returns an opaque access token: the prefix, then an
// ordered token (secrets.NewOrderedToken).
func NewAccessToken() string { return AccessPrefix + secrets.NewOrderedToken() }

// NewRefreshToken returns a refresh token: the prefix, then an ordered
// token.
func NewRefreshToken() string { return RefreshPrefix + secrets.NewOrderedToken() }

// NewCode returns an authorization code: the prefix, then 256 random bits.
func NewCode() string { return CodePrefix + secrets.RandomToken(32) }

// NewDeviceCode returns a device code (RFC 8628): the prefix, then 256
// random bits.
func NewDeviceCode() string { return DevicePrefix + secrets.RandomToken(32) }

// Of returns the kind raw's prefix names.
func Of(raw string) Kind {
	switch {
	case strings.HasPrefix(raw, AccessPrefix):
		return AccessToken
	case strings.HasPrefix(raw, RefreshPrefix):
		return RefreshToken
	case strings.HasPrefix(raw, CodePrefix):
		return AuthorizationCode
	case strings.HasPrefix(raw, DevicePrefix):
		return DeviceCode
	}
	return Unknown
}

// Other reports whether raw's prefix names a kind other than k: raw then
// cannot be a k, and needs no lookup.
func Other(raw string, k Kind) bool {
	o := Of(raw)
	return o != Unknown && o != k
}
