package discovery

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/cachedjson"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/keys"
)

// Path is where the document is served.
const Path = "/.well-known/openid-configuration"

// CacheControl of the document.
const CacheControl = "public, max-age=300"

// Endpoint paths below the issuer (DESIGN.md; the seed's versioned paths).
const (
	AuthorizationPath = "/oauth/v2/authorize"
	TokenPath         = "/oauth/v2/token"
	IntrospectionPath = "/oauth/v2/introspect"
	RevocationPath    = "/oauth/v2/revoke"
	KeysPath          = "/oauth/v2/keys"
	UserinfoPath      = "/oidc/v1/userinfo"
	EndSessionPath    = "/oidc/v1/end_session"
	DevicePath        = "/oauth/v2/device_authorization"
	PARPath           = "/oauth/v2/par"
)

// Source provides the published keys; keys.Manager implements it.
type Source interface {
	PublicKeys() keys.PublicKeySet
}

var _ Source = (*keys.Manager)(nil)

// Metadata is the discovery document (OpenID Connect Discovery 1.0 §3,
// RFC 8414 §2 for the introspection and revocation members). Fields are in
// the order they are serialized.
type Metadata struct {
	Issuer                                    string   `json:"issuer"`
	AuthorizationEndpoint                     string   `json:"authorization_endpoint"`
	TokenEndpoint                             string   `json:"token_endpoint"`
	IntrospectionEndpoint                     string   `json:"introspection_endpoint"`
	RevocationEndpoint                        string   `json:"revocation_endpoint"`
	UserinfoEndpoint                          string   `json:"userinfo_endpoint"`
	EndSessionEndpoint                        string   `json:"end_session_endpoint"`
	BackchannelLogoutSupported                bool     `json:"backchannel_logout_supported"`
	BackchannelLogoutSessionSupported         bool     `json:"backchannel_logout_session_supported"`
	DeviceAuthorizationEndpoint               string   `json:"device_authorization_endpoint"`
	PushedAuthorizationRequestEndpoint        string   `json:"pushed_authorization_request_endpoint"`
	RequirePushedAuthorizationRequests        bool     `json:"require_pushed_authorization_requests"`
	DPoPSigningAlgValuesSupported             []string `json:"dpop_signing_alg_values_supported"`
	JWKSURI                                   string   `json:"jwks_uri"`
	ScopesSupported                           []string `json:"scopes_supported"`
	ResponseTypesSupported                    []string `json:"response_types_supported"`
	ResponseModesSupported                    []string `json:"response_modes_supported"`
	GrantTypesSupported                       []string `json:"grant_types_supported"`
	SubjectTypesSupported                     []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported          []string `json:"id_token_signing_alg_values_supported"`
	TokenEndpointAuthMethodsSupported         []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthSigningAlgValues         []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	IntrospectionEndpointAuthMethodsSupported []string `json:"introspection_endpoint_auth_methods_supported"`
	IntrospectionEndpointAuthSigningAlgValues []string `json:"introspection_endpoint_auth_signing_alg_values_supported"`
	RevocationEndpointAuthMethodsSupported    []string `json:"revocation_endpoint_auth_methods_supported"`
	RevocationEndpointAuthSigningAlgValues    []string `json:"revocation_endpoint_auth_signing_alg_values_supported"`
	CodeChallengeMethodsSupported             []string `json:"code_challenge_methods_supported"`
	ClaimsSupported                           []string `json:"claims_supported"`
	ACRValuesSupported                        []string `json:"acr_values_supported"`
	AMRValuesSupported                        []string `json:"amr_values_supported"`
	UILocalesSupported                        []string `json:"ui_locales_supported"`
	PromptValuesSupported                     []string `json:"prompt_values_supported"`
	ClaimsParameterSupported                  bool     `json:"claims_parameter_supported"`
	RequestParameterSupported                 bool     `json:"request_parameter_supported"`
	RequestURIParameterSupported              bool     `json:"request_uri_parameter_supported"`
	RequestObjectSigningAlgValuesSupported    []string `json:"request_object_signing_alg_values_supported"`
	// RFC 9207: authorization responses carry iss.
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

// Client authentication methods and the algorithms accepted for
// private_key_jwt assertions.
var (
	allAuthMethods       = []string{"client_secret_basic", "client_secret_post", "none", "private_key_jwt"}
	assertionAlgorithms  = []string{keys.RS256, keys.ES256, keys.EdDSA}
	introspectionMethods = []string{"client_secret_basic", "private_key_jwt"}
)

// Document returns the metadata for issuer (no trailing slash) with the
// given ID token signing algorithms.
func Document(issuer string, signingAlgs []string) *Metadata {
	return DocumentFor(issuer, signingAlgs, false)
}

// DocumentFor is Document; requirePAR says every authorization request
// must be pushed (GATEHOUSE_REQUIRE_PAR).
func DocumentFor(issuer string, signingAlgs []string, requirePAR bool) *Metadata {
	issuer = strings.TrimRight(issuer, "/")
	return &Metadata{
		Issuer:                issuer,
		AuthorizationEndpoint: issuer + AuthorizationPath,
		TokenEndpoint:         issuer + TokenPath,
		IntrospectionEndpoint: issuer + IntrospectionPath,
		RevocationEndpoint:    issuer + RevocationPath,
		UserinfoEndpoint:      issuer + UserinfoPath,
		EndSessionEndpoint:    issuer + EndSessionPath,
		// Back-Channel Logout 1.0 §2.1: ending a session, or a user's
		// cut-off, posts logout tokens with sid (ID tokens carry it) to
		// the apps' registered URIs (tokens' backchannel package).
		BackchannelLogoutSupported:        true,
		BackchannelLogoutSessionSupported: true,
		// RFC 8628 §4.
		DeviceAuthorizationEndpoint: issuer + DevicePath,
		// RFC 9126 §5.
		PushedAuthorizationRequestEndpoint: issuer + PARPath,
		JWKSURI:                            issuer + KeysPath,
		ScopesSupported:                    []string{"openid", "profile", "email", "phone", "address", "offline_access"},
		ResponseTypesSupported:             []string{"code", "id_token", "id_token token"},
		ResponseModesSupported:             []string{"query", "fragment"},
		GrantTypesSupported: []string{"authorization_code", "implicit", "refresh_token", "client_credentials",
			"urn:ietf:params:oauth:grant-type:jwt-bearer", "urn:ietf:params:oauth:grant-type:device_code",
			"urn:ietf:params:oauth:grant-type:token-exchange"},
		SubjectTypesSupported:                     []string{"public"},
		IDTokenSigningAlgValuesSupported:          signingAlgs,
		TokenEndpointAuthMethodsSupported:         allAuthMethods,
		TokenEndpointAuthSigningAlgValues:         assertionAlgorithms,
		IntrospectionEndpointAuthMethodsSupported: introspectionMethods,
		IntrospectionEndpointAuthSigningAlgValues: assertionAlgorithms,
		RevocationEndpointAuthMethodsSupported:    allAuthMethods,
		RevocationEndpointAuthSigningAlgValues:    assertionAlgorithms,
		CodeChallengeMethodsSupported:             []string{"S256"},
		// Only claims Gatehouse issues (ID token, userinfo, introspection).
		ClaimsSupported: []string{"sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "amr", "acr", "azp",
			"at_hash", "c_hash", "name", "given_name", "family_name", "nickname", "preferred_username",
			"locale", "gender", "updated_at", "email", "email_verified", "phone_number", "phone_number_verified"},
		ACRValuesSupported: oauth.ACRValues(),
		AMRValuesSupported: oauth.AMRValues(),
		UILocalesSupported: []string{"en", "de"},
		// authn's authorize.PromptValues (tokens does not import authn).
		PromptValuesSupported:    []string{"none", "login", "consent", "select_account", "create"},
		ClaimsParameterSupported: false,
		// RFC 9101: request objects signed with the client's registered
		// keys; request_uri only as PAR's (no fetching of URLs).
		RequestParameterSupported:                  true,
		RequestObjectSigningAlgValuesSupported:     assertionAlgorithms,
		RequestURIParameterSupported:               false,
		AuthorizationResponseIssParameterSupported: true,
		RequirePushedAuthorizationRequests:         requirePAR,
		// RFC 9449 §5.1: the token endpoint binds tokens to a DPoP
		// proof's key; userinfo takes them with a proof.
		DPoPSigningAlgValuesSupported: dpop.Algorithms,
	}
}

// Handler serves the discovery document.
type Handler struct{ *cachedjson.Handler }

// NewHandler serves the document for issuer (cfg.Issuer.String()). The ID
// token signing algorithms listed are those of src's published keys plus
// defaultAlg (the configured algorithm, so it is listed before its first
// key exists); it is serialized again only when the published keys change.
func NewHandler(issuer, defaultAlg string, src Source, logger *slog.Logger) *Handler {
	return NewHandlerFor(issuer, defaultAlg, false, src, logger)
}

// NewHandlerFor is NewHandler; requirePAR is GATEHOUSE_REQUIRE_PAR.
func NewHandlerFor(issuer, defaultAlg string, requirePAR bool, src Source, logger *slog.Logger) *Handler {
	return &Handler{cachedjson.New("discovery", CacheControl, func() (uint64, func() ([]byte, error)) {
		set := src.PublicKeys()
		return set.Version, func() ([]byte, error) {
			body, err := json.Marshal(DocumentFor(issuer, SigningAlgorithms(defaultAlg, set), requirePAR))
			if err != nil {
				return nil, fmt.Errorf("encode discovery document: %w", err)
			}
			return body, nil
		}
	}, logger)}
}

// SigningAlgorithms lists what a relying party can get: the algorithms of
// the published keys, the default first (and the default alone while no
// key is published). A key of a new algorithm is published before it
// signs, so the list has it first; relying parties that read discovery
// once at start (go-oidc) must read it again after an algorithm change
// (README, "Signing keys"); a rotation within one algorithm needs nothing.
func SigningAlgorithms(defaultAlg string, set keys.PublicKeySet) []string {
	published := map[string]bool{}
	for _, k := range set.Keys {
		published[k.Algorithm] = true
	}
	algs := []string{}
	if defaultAlg != "" && (published[defaultAlg] || len(set.Keys) == 0) {
		algs = append(algs, defaultAlg)
	}
	for _, a := range keys.Algorithms {
		if a != defaultAlg && published[a] {
			algs = append(algs, a)
		}
	}
	return algs
}
