package userinfo

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
	"github.com/gatehouse-id/gatehouse/services/tokens/dpop"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/form"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/introspection"
)

// Path is the public userinfo endpoint.
const Path = "/oidc/v1/userinfo"

// InsufficientScope is RFC 6750 §3.1's error for a token without openid.
const InsufficientScope = "insufficient_scope"

// AccessTokens validates access tokens (accesstoken.Verifier).
type AccessTokens interface {
	Verify(ctx context.Context, raw string) (*accesstoken.Token, error)
}

// Endpoint is the userinfo endpoint.
type Endpoint struct {
	Tokens    AccessTokens
	Directory introspection.Claims
	Logger    *slog.Logger
	// DPoP, when set, accepts DPoP-bound tokens with a proof for URL, the
	// endpoint's public address (RFC 9449 §7); without it a bound token
	// is refused like any token whose binding cannot be checked.
	DPoP *dpop.Verifier
	URL  string
}

// New returns the userinfo endpoint.
func New(tokens AccessTokens, dir introspection.Claims, logger *slog.Logger) *Endpoint {
	if logger == nil {
		logger = slog.Default()
	}
	return &Endpoint{Tokens: tokens, Directory: dir, Logger: logger}
}

// errNoToken: the request carries no access token; RFC 6750 §3.1 says the
// challenge then has no error code.
var errNoToken = errors.New("no access token")

// invalidToken is 401 invalid_token; the description is fixed text, so the
// challenge's quoted string needs no escaping (RFC 6750 §3: no " or \).
func invalidToken() *oauth.Error {
	return oauth.New(oauth.InvalidToken, "The access token is invalid, expired or revoked")
}

// ServeHTTP answers GET and POST: 200 with the claims as JSON;
// 400 invalid_request for a malformed request, two token transports at
// once, or a token in the query string; 401 with a bare Bearer challenge
// without a token; 401 invalid_token for a bad, expired or revoked token
// or a deleted user; 403 insufficient_scope without openid; 405 for other
// methods; 503 temporarily_unavailable when a dependency fails. Every
// response is Cache-Control: no-store.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		e.writeError(w, r, &oauth.Error{Code: oauth.InvalidRequest, Description: "userinfo accepts GET and POST only",
			Status: http.StatusMethodNotAllowed})
		return
	}
	claims, err := e.userinfo(r)
	if err != nil {
		e.writeError(w, r, err)
		return
	}
	b, err := json.Marshal(claims)
	if err != nil {
		e.writeError(w, r, oauth.New(oauth.ServerError, "internal error").WithCause(err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	if e.DPoP != nil && e.DPoP.Nonces != nil {
		h.Set("DPoP-Nonce", e.DPoP.Nonces.Current()) // the next proof's
	}
	_, _ = w.Write(append(b, '\n'))
}

func (e *Endpoint) userinfo(r *http.Request) (map[string]any, error) {
	raw, scheme, err := credential(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	// The token first: a caller without a good token puts nothing in the
	// proofs' replay store.
	t, err := e.Tokens.Verify(ctx, raw)
	if errors.Is(err, accesstoken.ErrInactive) {
		return nil, invalidToken()
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "token validation failed").WithCause(err)
	}
	var proof *dpop.Proof
	if scheme == schemeDPoP {
		if proof, err = e.proof(r, raw); err != nil {
			return nil, err
		}
	}
	switch {
	case t.JKT != "" && proof == nil:
		// A stolen bound token is worth nothing as a bearer token.
		return nil, invalidToken().WithCause(errors.New("a DPoP-bound token presented as a bearer token"))
	case proof != nil && t.JKT != proof.JKT:
		return nil, invalidToken().WithCause(errors.New("the DPoP proof's key is not the token's"))
	}
	if !slices.Contains(t.Scopes, "openid") {
		return nil, &oauth.Error{Code: InsufficientScope, Description: "The access token was not granted the openid scope",
			Status: http.StatusForbidden}
	}
	claims, _, err := introspection.UserClaims(ctx, e.Directory, t)
	if errors.Is(err, introspection.ErrUserGone) {
		return nil, invalidToken().WithCause(err)
	}
	return claims, err
}

// proof verifies the request's one DPoP header for the token raw.
func (e *Endpoint) proof(r *http.Request, raw string) (*dpop.Proof, error) {
	if e.DPoP == nil {
		return nil, invalidToken().WithCause(errors.New("DPoP is not enabled"))
	}
	hs := r.Header.Values("DPoP")
	if len(hs) != 1 {
		return nil, oauth.New(oauth.InvalidDPoPProof, "send exactly one DPoP header with a DPoP-bound token")
	}
	p, err := e.DPoP.Verify(r.Context(), hs[0], dpop.Request{Method: r.Method, URL: e.URL, AccessToken: raw})
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		return nil, oauth.New(oauth.UseDPoPNonce, "Resource server requires nonce in DPoP proof")
	case errors.Is(err, dpop.ErrInvalid):
		return nil, oauth.New(oauth.InvalidDPoPProof, "The DPoP proof is invalid").WithCause(err)
	case err != nil:
		return nil, oauth.New(oauth.TemporarilyUnavailable, "DPoP proof check failed").WithCause(err)
	}
	return p, nil
}

const (
	schemeBearer = "Bearer"
	schemeDPoP   = "DPoP"
)

// credential finds the one access token of the request and its scheme: a
// Bearer or DPoP Authorization header (the scheme is case-insensitive,
// RFC 9110 §11.1), or access_token in a POST form body (RFC 6750 §2, a
// bearer token). An Authorization header of another scheme carries no
// token.
func credential(r *http.Request) (string, string, error) {
	if r.URL.Query().Has("access_token") {
		return "", "", oauth.New(oauth.InvalidRequest, "access tokens are not accepted in the query string")
	}
	scheme := schemeBearer
	if vs := r.Header.Values("Authorization"); len(vs) == 1 {
		if s, cred, _ := strings.Cut(vs[0], " "); strings.EqualFold(s, schemeDPoP) {
			cred = strings.TrimSpace(cred)
			if cred == "" || strings.ContainsAny(cred, " \t") {
				return "", "", oauth.New(oauth.InvalidRequest, "malformed DPoP credentials")
			}
			if r.Method == http.MethodPost && form.IsForm(r) {
				if values, err := form.Body(r); err != nil {
					return "", "", err
				} else if _, ok := values["access_token"]; ok {
					return "", "", oauth.New(oauth.InvalidRequest, "the access token was sent in both the Authorization header and the body")
				}
			}
			return cred, schemeDPoP, nil
		}
	}
	raw, err := bearer(r)
	return raw, scheme, err
}

// bearer finds the one bearer token of the request (RFC 6750 §2): a
// Bearer Authorization header or access_token in a POST form body.
func bearer(r *http.Request) (string, error) {
	if r.URL.Query().Has("access_token") {
		return "", oauth.New(oauth.InvalidRequest, "access tokens are not accepted in the query string")
	}
	var header string
	var fromHeader bool
	if vs := r.Header.Values("Authorization"); len(vs) > 1 {
		return "", oauth.New(oauth.InvalidRequest, "more than one Authorization header")
	} else if len(vs) == 1 {
		scheme, cred, _ := strings.Cut(vs[0], " ")
		if strings.EqualFold(scheme, "Bearer") {
			fromHeader = true
			header = strings.TrimSpace(cred)
			if header == "" || strings.ContainsAny(header, " \t") {
				return "", oauth.New(oauth.InvalidRequest, "malformed Bearer credentials")
			}
		}
	}
	var body string
	var fromBody bool
	if r.Method == http.MethodPost && form.IsForm(r) {
		values, err := form.Body(r)
		if err != nil {
			return "", err
		}
		body, fromBody = values["access_token"]
		if fromBody && body == "" {
			return "", oauth.New(oauth.InvalidRequest, "access_token is empty")
		}
	}
	switch {
	case fromHeader && fromBody:
		return "", oauth.New(oauth.InvalidRequest, "the access token was sent in both the Authorization header and the body")
	case fromHeader:
		return header, nil
	case fromBody:
		return body, nil
	}
	return "", errNoToken
}

// writeError renders every error of this endpoint: RFC 6750 §3's
// WWW-Authenticate challenge for 400, 401 and 403, and the error as JSON
// (RFC 6749 §5.2 shape) except when no token was sent.
func (e *Endpoint) writeError(w http.ResponseWriter, r *http.Request, err error) {
	h := w.Header()
	if e.DPoP != nil && e.DPoP.Nonces != nil {
		h.Set("DPoP-Nonce", e.DPoP.Nonces.Current())
	}
	if errors.Is(err, errNoToken) {
		h.Set("WWW-Authenticate", "Bearer")
		if e.DPoP != nil {
			h.Add("WWW-Authenticate", e.dpopChallenge(""))
		}
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	oe := oauth.As(err)
	if oe.Code == oauth.InvalidDPoPProof || oe.Code == oauth.UseDPoPNonce {
		// RFC 9449 §7.1: 401 with a DPoP challenge naming the error.
		c := *oe
		c.Status = http.StatusUnauthorized
		oe = &c
		h.Set("WWW-Authenticate", e.dpopChallenge(`error="`+oe.Code+`", error_description="`+quotable(oe.Description)+`"`))
		oauth.Write(w, r, e.Logger, "userinfo", oe)
		return
	}
	switch oe.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		params := `error="` + oe.Code + `", error_description="` + quotable(oe.Description) + `"`
		if oe.Code == InsufficientScope {
			params += `, scope="openid"`
		}
		// Both schemes are offered (RFC 9449 §7.1); a DPoP-bound token
		// refused as a bearer one is told in the DPoP challenge.
		h.Set("WWW-Authenticate", "Bearer "+params)
		if e.DPoP != nil {
			h.Add("WWW-Authenticate", e.dpopChallenge(params))
		}
	}
	oauth.Write(w, r, e.Logger, "userinfo", oe)
}

// dpopChallenge is a DPoP WWW-Authenticate challenge with params (RFC
// 9449 §7.1), naming the proof algorithms accepted.
func (e *Endpoint) dpopChallenge(params string) string {
	c := `DPoP algs="` + strings.Join(dpop.Algorithms, " ") + `"`
	if params != "" {
		c += ", " + params
	}
	return c
}

// quotable drops what RFC 6750 §3 does not allow in error_description
// (outside %x20-21 / %x23-5B / %x5D-7E), since a description may echo
// request input such as a parameter name.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
}
