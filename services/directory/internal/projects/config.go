package projects

import (
	"encoding/json"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gatehouse-id/gatehouse/services/directory/internal/apierr"
)

// OAuth vocabulary stored in app configurations (and handed to authn and
// tokens as is).
const (
	ResponseCode         = "code"
	ResponseIDToken      = "id_token"
	ResponseIDTokenToken = "id_token token"

	GrantAuthorizationCode = "authorization_code"
	GrantImplicit          = "implicit"
	GrantRefreshToken      = "refresh_token"
	// Registered grants Gatehouse does not offer: refused by Validate.
	GrantDeviceCode    = "urn:ietf:params:oauth:grant-type:device_code"
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"

	AppTypeWeb       = "web"
	AppTypeUserAgent = "user_agent"
	AppTypeNative    = "native"

	AuthBasic         = "client_secret_basic"
	AuthPost          = "client_secret_post"
	AuthNone          = "none"
	AuthPrivateKeyJWT = "private_key_jwt"

	AccessTokenOpaque = "opaque"
	AccessTokenJWT    = "jwt"

	// LoginV1 is the built-in login UI; "" means the instance default
	// (which is the same UI, but the API reports what was set).
	LoginV1 = "v1"
)

// Limits of an OIDC configuration (the management proto's).
const (
	MaxURIs         = 50
	MaxURILength    = 500
	MaxClockSkew    = 5 * time.Second
	MaxNameLength   = 200
	SecretRandBytes = 32
)

// MethodUsesSecret reports whether an auth method authenticates with a
// client secret (BASIC or POST).
func MethodUsesSecret(m string) bool { return m == AuthBasic || m == AuthPost }

// OIDCConfig is an OIDC application's configuration, stored as JSON in
// apps.config and in events.
type OIDCConfig struct {
	RedirectURIs             []string      `json:"redirectUris,omitempty"`
	ResponseTypes            []string      `json:"responseTypes"`
	GrantTypes               []string      `json:"grantTypes"`
	AppType                  string        `json:"appType"`
	AuthMethod               string        `json:"authMethod"`
	PostLogoutRedirectURIs   []string      `json:"postLogoutRedirectUris,omitempty"`
	DevMode                  bool          `json:"devMode,omitempty"`
	AccessTokenType          string        `json:"accessTokenType"`
	AccessTokenRoleAssertion bool          `json:"accessTokenRoleAssertion,omitempty"`
	IDTokenRoleAssertion     bool          `json:"idTokenRoleAssertion,omitempty"`
	IDTokenUserinfoAssertion bool          `json:"idTokenUserinfoAssertion,omitempty"`
	ClockSkew                time.Duration `json:"clockSkew,omitempty"`
	AdditionalOrigins        []string      `json:"additionalOrigins,omitempty"`
	SkipNativeAppSuccessPage bool          `json:"skipNativeAppSuccessPage,omitempty"`
	BackChannelLogoutURI     string        `json:"backChannelLogoutUri,omitempty"`
	LoginVersion             string        `json:"loginVersion,omitempty"`
	// RequirePAR: authorization requests must be pushed first (RFC 9126).
	RequirePAR bool `json:"requirePushedAuthorizationRequests,omitempty"`
	// DPoPBound: every token request must carry a DPoP proof (RFC 9449
	// §5.2 dpop_bound_access_tokens).
	DPoPBound bool `json:"dpopBoundAccessTokens,omitempty"`
}

// APIConfig is an API application's configuration.
type APIConfig struct {
	AuthMethod string `json:"authMethod"`
}

// Normalize applies the defaults (response type code, grant type
// authorization_code) and drops duplicate entries, keeping the first.
func (c *OIDCConfig) Normalize() {
	c.ResponseTypes = dedupe(c.ResponseTypes)
	if len(c.ResponseTypes) == 0 {
		c.ResponseTypes = []string{ResponseCode}
	}
	c.GrantTypes = dedupe(c.GrantTypes)
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{GrantAuthorizationCode}
	}
	c.RedirectURIs = dedupe(c.RedirectURIs)
	c.PostLogoutRedirectURIs = dedupe(c.PostLogoutRedirectURIs)
	c.AdditionalOrigins = dedupe(c.AdditionalOrigins)
}

func dedupe(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Equal reports whether two normalized configurations are the same.
func (c *OIDCConfig) Equal(o *OIDCConfig) bool {
	a, errA := json.Marshal(c)
	b, errB := json.Marshal(o)
	return errA == nil && errB == nil && string(a) == string(b)
}

// Validate checks a normalized configuration against the rules of the
// management API, adding every problem to f: URIs (count, length, absolute,
// no fragment), origins, clock skew, and response types consistent with
// grant types (code needs authorization_code, id_token and "id_token token"
// need implicit; refresh_token needs authorization_code). Whether the
// configuration suits its app type is not an error but a compliance
// problem (see Compliance), as in ZITADEL.
func (c *OIDCConfig) Validate(f *apierr.Fields) {
	for i, rt := range c.ResponseTypes {
		checkOneOf(f, "response_types["+strconv.Itoa(i)+"]", rt, ResponseCode, ResponseIDToken, ResponseIDTokenToken)
	}
	for i, g := range c.GrantTypes {
		checkOneOf(f, "grant_types["+strconv.Itoa(i)+"]", g, GrantAuthorizationCode, GrantImplicit, GrantRefreshToken, GrantDeviceCode, GrantTokenExchange)
	}
	if slices.Contains(c.GrantTypes, GrantTokenExchange) && c.AuthMethod == AuthNone {
		// A public client proves nothing of who exchanges (RFC 8693 §2.1).
		f.Add("grant_types", "the token exchange grant needs an authenticated client (not auth method none)")
	}
	checkOneOf(f, "app_type", c.AppType, AppTypeWeb, AppTypeUserAgent, AppTypeNative)
	checkOneOf(f, "auth_method_type", c.AuthMethod, AuthBasic, AuthPost, AuthNone, AuthPrivateKeyJWT)
	checkOneOf(f, "access_token_type", c.AccessTokenType, AccessTokenOpaque, AccessTokenJWT)
	if c.LoginVersion != "" && c.LoginVersion != LoginV1 {
		f.Add("login_version", "only the built-in login (login_v1) is supported")
	}
	checkURIs(f, "redirect_uris", c.RedirectURIs, true)
	checkURIs(f, "post_logout_redirect_uris", c.PostLogoutRedirectURIs, false)
	if c.DPoPBound && slices.Contains(c.GrantTypes, GrantImplicit) {
		// Tokens of the authorization endpoint come without a proof.
		f.Add("dpop_bound_access_tokens", "cannot be set with the implicit grant")
	}
	if len(c.RedirectURIs) == 0 && (slices.Contains(c.GrantTypes, GrantAuthorizationCode) || slices.Contains(c.GrantTypes, GrantImplicit)) {
		f.Add("redirect_uris", "at least one is required for the authorization_code and implicit grants")
	}
	if len(c.AdditionalOrigins) > MaxURIs {
		f.Add("additional_origins", "must have at most "+strconv.Itoa(MaxURIs)+" entries")
	}
	for i, o := range c.AdditionalOrigins {
		if msg := checkOrigin(o); msg != "" {
			f.Add("additional_origins["+strconv.Itoa(i)+"]", msg)
		}
	}
	if c.BackChannelLogoutURI != "" {
		if msg := checkURI(c.BackChannelLogoutURI, true); msg != "" {
			f.Add("back_channel_logout_uri", msg)
		} else if u, _ := url.Parse(c.BackChannelLogoutURI); u.Scheme != "http" && u.Scheme != "https" {
			f.Add("back_channel_logout_uri", "must be an http or https URL")
		}
	}
	if c.ClockSkew < 0 || c.ClockSkew > MaxClockSkew {
		f.Add("clock_skew", "must be between 0 and 5 seconds")
	}
	for _, rt := range c.ResponseTypes {
		need := GrantImplicit
		if rt == ResponseCode {
			need = GrantAuthorizationCode
		}
		if rt == ResponseCode && slices.Contains(c.GrantTypes, GrantDeviceCode) {
			continue // ZITADEL's device apps keep the default response type
		}
		if (rt == ResponseCode || rt == ResponseIDToken || rt == ResponseIDTokenToken) && !slices.Contains(c.GrantTypes, need) {
			f.Add("response_types", "response type "+strconv.Quote(rt)+" requires grant type "+need)
		}
	}
	if slices.Contains(c.GrantTypes, GrantRefreshToken) && !slices.Contains(c.GrantTypes, GrantAuthorizationCode) &&
		!slices.Contains(c.GrantTypes, GrantDeviceCode) {
		f.Add("grant_types", "refresh_token requires authorization_code or device_code")
	}
}

// Validate checks an API application's configuration.
func (c *APIConfig) Validate(f *apierr.Fields) {
	checkOneOf(f, "auth_method_type", c.AuthMethod, AuthBasic, AuthPrivateKeyJWT)
}

func checkOneOf(f *apierr.Fields, field, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		f.Add(field, "must be a defined value")
	}
}

// checkURIs validates a list of URIs; fragments are refused for redirect
// URIs (RFC 6749 section 3.1.2).
func checkURIs(f *apierr.Fields, field string, uris []string, noFragment bool) {
	if len(uris) > MaxURIs {
		f.Add(field, "must have at most "+strconv.Itoa(MaxURIs)+" entries")
	}
	for i, u := range uris {
		if msg := checkURI(u, noFragment); msg != "" {
			f.Add(field+"["+strconv.Itoa(i)+"]", msg)
		}
	}
}

// checkURI returns why raw is not an acceptable absolute URI, or "".
func checkURI(raw string, noFragment bool) string {
	if raw == "" {
		return "is required"
	}
	if utf8.RuneCountInString(raw) > MaxURILength {
		return "must have at most " + strconv.Itoa(MaxURILength) + " characters"
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "must not contain whitespace"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a valid URI"
	}
	if !u.IsAbs() {
		return "must be an absolute URI"
	}
	if noFragment && (u.Fragment != "" || strings.Contains(raw, "#")) {
		return "must not contain a fragment"
	}
	if (u.Scheme == "http" || u.Scheme == "https") && u.Host == "" {
		return "must name a host"
	}
	return ""
}

// checkOrigin returns why o is not scheme://host[:port], or "".
func checkOrigin(o string) string {
	if msg := checkURI(o, true); msg != "" {
		return msg
	}
	u, _ := url.Parse(o)
	if u.Host == "" || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || strings.HasSuffix(o, "?") {
		return "must be an origin: scheme://host[:port]"
	}
	return ""
}

// AllowedOrigins are the CORS origins of the app: those of its http(s)
// redirect URIs and the additional origins, without duplicates.
func (c *OIDCConfig) AllowedOrigins() []string {
	var out []string
	for _, raw := range c.RedirectURIs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	for _, o := range c.AdditionalOrigins {
		out = append(out, strings.TrimSuffix(o, "/"))
	}
	return dedupe(out)
}

// Problem is a compliance problem: a stable key and an English message.
type Problem struct{ Key, Message string }

// Compliance problem keys (ZITADEL's where ZITADEL has the rule).
const (
	ProblemNotCompliant          = "Application.OIDC.V1.NotCompliant"
	ProblemHTTPOnlyForDevMode    = "Application.OIDC.V1.RedirectUris.HttpOnlyForDevMode"
	ProblemNativeHTTPLocalhost   = "Application.OIDC.V1.Native.RedirectUris.MustBeHttpLocalhost"
	ProblemCustomOnlyForNative   = "Application.OIDC.V1.Code.RedirectUris.CustomOnlyForNative"
	ProblemImplicitCustomScheme  = "Application.OIDC.V1.Implicit.RedirectUris.CustomNotAllowed"
	ProblemNativeAuthNotNone     = "Application.OIDC.V1.Native.AuthMethodType.NotNone"
	ProblemUserAgentAuthNotNone  = "Application.OIDC.V1.UserAgent.AuthMethodType.NotNone"
	ProblemImplicitHTTPForbidden = "Application.OIDC.V1.Implicit.RedirectUris.HttpNotAllowed"
)

var problemText = map[string]string{
	ProblemNotCompliant:          "The configuration does not comply with OIDC for its application type.",
	ProblemHTTPOnlyForDevMode:    "http redirect URIs are allowed only for loopback hosts or in development mode.",
	ProblemNativeHTTPLocalhost:   "Native applications may use http redirect URIs only for loopback hosts.",
	ProblemCustomOnlyForNative:   "Custom URI schemes are allowed only for native applications.",
	ProblemImplicitCustomScheme:  "The implicit flow does not allow custom URI schemes.",
	ProblemImplicitHTTPForbidden: "The implicit flow allows http redirect URIs only for loopback hosts or in development mode.",
	ProblemNativeAuthNotNone:     "Native applications are public clients: use auth method NONE with PKCE.",
	ProblemUserAgentAuthNotNone:  "User-agent applications are public clients: use auth method NONE with PKCE.",
}

// Compliance lists what about a valid configuration does not comply with
// OIDC for its app type: http redirect URIs outside loopback and dev mode,
// custom schemes outside native apps (never with implicit), and a client
// secret or key for a public client. The first entry is ProblemNotCompliant
// when there is any. The login UI enforces the same redirect rules at
// authorization time; here they are reported so admins can fix them.
func (c *OIDCConfig) Compliance() []Problem {
	var keys []string
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	implicit := slices.Contains(c.GrantTypes, GrantImplicit)
	for _, raw := range c.RedirectURIs {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		switch u.Scheme {
		case "https":
		case "http":
			if IsLoopback(u.Hostname()) || c.DevMode {
				continue
			}
			switch {
			case c.AppType == AppTypeNative:
				add(ProblemNativeHTTPLocalhost)
			case implicit:
				add(ProblemImplicitHTTPForbidden)
			default:
				add(ProblemHTTPOnlyForDevMode)
			}
		default:
			if c.AppType != AppTypeNative {
				add(ProblemCustomOnlyForNative)
			}
			if implicit {
				add(ProblemImplicitCustomScheme)
			}
		}
	}
	if c.AuthMethod != AuthNone {
		switch c.AppType {
		case AppTypeNative:
			add(ProblemNativeAuthNotNone)
		case AppTypeUserAgent:
			add(ProblemUserAgentAuthNotNone)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	out := []Problem{{ProblemNotCompliant, problemText[ProblemNotCompliant]}}
	for _, k := range keys {
		out = append(out, Problem{k, problemText[k]})
	}
	return out
}

// IsLoopback reports whether host is localhost or a loopback address
// (RFC 8252 section 7.3).
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
