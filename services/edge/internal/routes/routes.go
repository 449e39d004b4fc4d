package routes

import "strings"

// Service names a backend behind edge.
type Service string

// The services edge routes to.
const (
	Authn     Service = "authn"
	Tokens    Service = "tokens"
	Directory Service = "directory"
)

// Services lists every service that appears in the table.
func Services() []Service { return []Service{Authn, Tokens, Directory} }

// Kind classifies an endpoint for the router's per-route policies.
type Kind int

const (
	// OAuth is an OAuth/OIDC protocol endpoint that browsers' JavaScript may
	// call cross-origin (discovery, keys, token, userinfo, introspect,
	// revoke): edge answers CORS for it. Bodies are forms: small limit.
	OAuth Kind = iota + 1
	// Browser is a top-level navigation target (authorize, end_session, login
	// pages, IdP callback): no CORS, small body limit.
	Browser
	// REST is a JSON HTTP API (management, admin): small body limit.
	REST
	// RPC is a gRPC, gRPC-web or Connect service path: larger body limit.
	RPC
)

func (k Kind) String() string {
	switch k {
	case OAuth:
		return "oauth"
	case Browser:
		return "browser"
	case REST:
		return "rest"
	case RPC:
		return "rpc"
	}
	return "unknown"
}

// Class is a route's rate-limit class: which budget edge charges a request
// to, and by what the budget is keyed. Each class has its own rate and
// burst (GATEHOUSE_RATE_LIMIT* variables, see the README).
type Class string

// The rate-limit classes.
const (
	// ClassBrowser is what a person's browser loads: authorize,
	// end_session, the login and registration pages, the IdP callback, and
	// every path not in the table. Keyed by client address.
	ClassBrowser Class = "browser"
	// ClassClient is what an OAuth client's backend calls: token,
	// introspection and revocation. Keyed by the client it names (HTTP
	// Basic user, client_id, or client assertion subject), so a busy
	// backend neither shares its budget with browsers nor with other
	// clients behind the same address; by address when it names none.
	ClassClient Class = "client"
	// ClassAPI is called with a bearer token: userinfo and the
	// management and admin APIs in every protocol (and reflection). Keyed
	// by the token, by address without one.
	ClassAPI Class = "api"
	// ClassMetadata is discovery and the key set: public, cacheable
	// (their responses carry Cache-Control) and cheap, so never limited.
	// Edge keeps their responses for up to a second (microcache).
	ClassMetadata Class = "metadata"
)

// PasswordPosts are the login pages whose POST hashes a password (a
// sign-in, a password change, a registration, linking an external
// identity with the local password, a new password from a reset link or
// an invitation), sends mail (a password reset) or tries a guessable code
// (a device's user code, RFC 8628 §5.1): besides their class's budget, edge
// charges them to a smaller per-address one, since each costs an argon2id
// hash, of which a server runs only a few at once, or a message (authn's
// paths of these pages).
var PasswordPosts = []string{
	"/ui/login/password",
	"/ui/login/password/change",
	"/ui/login/password/reset",
	"/ui/login/password/new",
	"/ui/login/user/init",
	"/ui/login/mail/code",
	"/ui/login/register",
	"/ui/login/idp/link",
	"/ui/login/idp/register",
	"/ui/account/password",
	"/device",
}

// Classes lists every rate-limit class.
func Classes() []Class { return []Class{ClassBrowser, ClassClient, ClassAPI, ClassMetadata} }

// Route maps one path pattern to a service.
type Route struct {
	// Method restricts the route to one HTTP method; "" means any method, so
	// the service itself answers 405 with its own Allow header.
	Method string
	// Pattern is an exact path, or a prefix when it ends in "/*": "/a/*"
	// matches "/a/" and everything below it, but not "/a".
	Pattern string
	Service Service
	Kind    Kind
	Class   Class
}

// IsPrefix reports whether the pattern matches a subtree.
func (r Route) IsPrefix() bool { return strings.HasSuffix(r.Pattern, "/*") }

// Prefix returns the path prefix of a subtree pattern ("/a/" for "/a/*"),
// or the exact path.
func (r Route) Prefix() string { return strings.TrimSuffix(r.Pattern, "*") }

// CORS reports whether edge answers cross-origin requests for the route.
func (r Route) CORS() bool { return r.Kind == OAuth }

// Table returns the public route table (DESIGN.md "path (public, on edge)").
// /healthz, /readyz and /metrics are answered by the server wrapper before the
// router; /.well-known/oauth-authorization-server deliberately does not exist.
// The slice is freshly allocated on each call.
func Table() []Route {
	return []Route{
		// tokens: the OIDC protocol endpoints.
		{Pattern: "/.well-known/openid-configuration", Service: Tokens, Kind: OAuth, Class: ClassMetadata},
		{Pattern: "/oauth/v2/token", Service: Tokens, Kind: OAuth, Class: ClassClient},
		{Pattern: "/oauth/v2/introspect", Service: Tokens, Kind: OAuth, Class: ClassClient},
		{Pattern: "/oauth/v2/revoke", Service: Tokens, Kind: OAuth, Class: ClassClient},
		{Pattern: "/oauth/v2/device_authorization", Service: Tokens, Kind: OAuth, Class: ClassClient},
		{Pattern: "/oauth/v2/keys", Service: Tokens, Kind: OAuth, Class: ClassMetadata},
		{Pattern: "/oidc/v1/userinfo", Service: Tokens, Kind: OAuth, Class: ClassAPI},
		// tokens: instance administration (key rotation).
		{Pattern: "/admin/v1/*", Service: Tokens, Kind: REST, Class: ClassAPI},
		{Pattern: "/gatehouse.admin.v1.AdminService/*", Service: Tokens, Kind: RPC, Class: ClassAPI},

		// authn: browser flows; authorize lives with the login pages because
		// both need the same cookie.
		{Pattern: "/oauth/v2/authorize", Service: Authn, Kind: Browser, Class: ClassBrowser},
		// Pushed authorization requests (RFC 9126) are validated where
		// authorization requests are, called like the token endpoint.
		{Pattern: "/oauth/v2/par", Service: Authn, Kind: OAuth, Class: ClassClient},
		{Pattern: "/oidc/v1/end_session", Service: Authn, Kind: Browser, Class: ClassBrowser},
		{Pattern: "/ui/login", Service: Authn, Kind: Browser, Class: ClassBrowser},
		{Pattern: "/ui/login/*", Service: Authn, Kind: Browser, Class: ClassBrowser},
		{Pattern: "/ui/account", Service: Authn, Kind: Browser, Class: ClassBrowser},
		{Pattern: "/ui/account/*", Service: Authn, Kind: Browser, Class: ClassBrowser},
		{Pattern: "/idps/callback", Service: Authn, Kind: Browser, Class: ClassBrowser},
		// The device flow's pages (RFC 8628 verification_uri).
		{Pattern: "/device", Service: Authn, Kind: Browser, Class: ClassBrowser},
		{Pattern: "/device/*", Service: Authn, Kind: Browser, Class: ClassBrowser},

		// directory: the public management API in all its protocols, and
		// server reflection so grpcurl works through edge.
		{Pattern: "/management/v1/*", Service: Directory, Kind: REST, Class: ClassAPI},
		// ZITADEL's v2 user service paths (second factors), served by the
		// same management service.
		{Pattern: "/v2/users/*", Service: Directory, Kind: REST, Class: ClassAPI},
		{Pattern: "/gatehouse.management.v1.ManagementService/*", Service: Directory, Kind: RPC, Class: ClassAPI},
		{Pattern: "/grpc.reflection.v1.ServerReflection/*", Service: Directory, Kind: RPC, Class: ClassAPI},
		{Pattern: "/grpc.reflection.v1alpha.ServerReflection/*", Service: Directory, Kind: RPC, Class: ClassAPI},
	}
}
