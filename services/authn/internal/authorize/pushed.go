package authorize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Pushed authorization requests (RFC 9126) and request objects (RFC 9101).
//
// A client pushes its request to PathPAR, authenticated as at the token
// endpoint; Gatehouse validates it as an authorization request, keeps its
// parameters for PushedTTL and answers a request_uri, which the
// authorization endpoint then takes once, for that client only. A request
// object (the request parameter, at either endpoint) is a JWT signed with
// one of the client's registered keys; its claims are the request's
// parameters and every parameter outside it but client_id is ignored
// (RFC 9101 §5). Requests are resolved (unpack) before any other check, so
// both reach the same validation.

// PathPAR is the pushed authorization request endpoint.
const PathPAR = "/oauth/v2/par"

// RequestURIPrefix starts every request_uri Gatehouse issues (RFC 9126 §2.2).
const RequestURIPrefix = "urn:ietf:params:oauth:request_uri:"

// PushedTTL is how long a pushed request can be used (RFC 9126 §2.2: short).
const PushedTTL = 60 * time.Second

// Pushed is where pushed requests are kept (session.Store).
type Pushed interface {
	Push(ctx context.Context, p session.PushedRequest) error
	TakePushed(ctx context.Context, uri, clientID string, now time.Time) ([]byte, error)
}

// jwtClaims are a request object's claims about itself, not parameters.
var jwtClaims = map[string]bool{"iss": true, "aud": true, "exp": true, "iat": true, "nbf": true, "jti": true, "sub": true}

// unpack resolves a request_uri (a pushed request) or a request object
// into the request's parameters; pushed reports a pushed request. Errors
// show on Gatehouse: nothing of the request is trusted yet.
func (v *Validator) unpack(ctx context.Context, clientID string, p Params) (_ Params, pushed bool, _ error) {
	uri, err := p.one("request_uri")
	if err != nil {
		return nil, false, err
	}
	object, err := p.one("request")
	if err != nil {
		return nil, false, err
	}
	switch {
	case uri != "" && object != "":
		return nil, false, oauth.New(oauth.InvalidRequest, "request and request_uri cannot both be sent")
	case uri != "":
		if v.Pushed == nil || !strings.HasPrefix(uri, RequestURIPrefix) {
			return nil, false, oauth.New(oauth.InvalidRequestURI, "request_uri must be one the pushed authorization request endpoint issued")
		}
		raw, err := v.Pushed.TakePushed(ctx, uri, clientID, v.now())
		if errors.Is(err, session.ErrNotFound) {
			return nil, false, oauth.New(oauth.InvalidRequestURI, "request_uri is unknown, expired, used already or of another client")
		}
		if err != nil {
			return nil, false, err
		}
		var stored Params
		if err := json.Unmarshal(raw, &stored); err != nil {
			return nil, false, fmt.Errorf("pushed request: %w", err)
		}
		return stored, true, nil
	case object != "":
		params, err := v.requestObject(ctx, clientID, object)
		return params, false, err
	}
	return p, false, nil
}

// requestObject verifies a request object of clientID (through the
// tokens service, which holds the client's keys and the jti replay store)
// and returns its parameters.
func (v *Validator) requestObject(ctx context.Context, clientID, raw string) (Params, error) {
	claims, err := v.Tokens.VerifyRequestObject(ctx, clientID, raw)
	if errors.Is(err, ErrRequestObject) {
		return nil, oauth.New(oauth.InvalidRequestObject, "the request object is invalid").WithCause(err).
			WithHint("%s", strings.TrimPrefix(err.Error(), ErrRequestObject.Error()+": "))
	}
	if err != nil {
		return nil, dependencyError("tokens", err)
	}
	d := json.NewDecoder(bytes.NewReader(claims))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, oauth.New(oauth.InvalidRequestObject, "the request object's claims are not a JSON object")
	}
	out := Params{}
	for k, val := range m {
		if jwtClaims[k] {
			continue
		}
		if k == "request" || k == "request_uri" {
			return nil, oauth.New(oauth.InvalidRequestObject, "a request object cannot carry %s", k)
		}
		switch x := val.(type) {
		case string:
			out[k] = []string{x}
		case json.Number:
			out[k] = []string{x.String()}
		case bool:
			out[k] = []string{strconv.FormatBool(x)}
		default:
			b, _ := json.Marshal(x) // objects (claims) as their JSON text
			out[k] = []string{string(b)}
		}
	}
	if id := out.first("client_id"); id != "" && id != clientID {
		return nil, oauth.New(oauth.InvalidRequestObject, "the request object's client_id differs from the request's")
	}
	out["client_id"] = []string{clientID}
	return out, nil
}

func (v *Validator) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// PAREndpoint is POST /oauth/v2/par (RFC 9126 §2).
type PAREndpoint struct {
	Validator *Validator
	Logger    *slog.Logger
}

// parResponse is RFC 9126 §2.2's.
type parResponse struct {
	RequestURI string `json:"request_uri"`
	ExpiresIn  int64  `json:"expires_in"`
}

func (e *PAREndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := e.push(r)
	if err != nil {
		oauth.Write(w, r, e.Logger, "pushed authorization request", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(res)
}

func (e *PAREndpoint) push(r *http.Request) (*parResponse, error) {
	if r.Method != http.MethodPost {
		err := oauth.New(oauth.InvalidRequest, "this endpoint accepts POST only")
		err.Status = http.StatusMethodNotAllowed
		return nil, err
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return nil, oauth.New(oauth.InvalidRequest, "the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return nil, oauth.New(oauth.InvalidRequest, "malformed form body").WithCause(err)
	}
	form := r.PostForm
	for k, vals := range form {
		if len(vals) > 1 {
			return nil, oauth.New(oauth.InvalidRequest, "parameter %s is repeated", k)
		}
	}
	cr := ClientCredentials{ClientID: form.Get("client_id"), ClientSecret: form.Get("client_secret"),
		ClientAssertionType: form.Get("client_assertion_type"), ClientAssertion: form.Get("client_assertion"),
		DPoPProofs: r.Header.Values("DPoP")}
	if _, ok := r.Header["Authorization"]; ok {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return nil, oauth.New(oauth.InvalidRequest, "the Authorization header must use the Basic scheme")
		}
		cr.Basic, cr.BasicUser, cr.BasicPass = true, user, pass
	}
	ctx := r.Context()
	v := e.Validator
	client, err := v.Tokens.AuthenticateClient(ctx, cr)
	if err != nil {
		return nil, err
	}
	clientID := client.ClientID
	if client.DPoPJKT != "" {
		// RFC 9449 §10.1: the proof binds the code to its key, as
		// dpop_jkt does; both must name the same key.
		if jkt := form.Get("dpop_jkt"); jkt != "" && jkt != client.DPoPJKT {
			return nil, oauth.New(oauth.InvalidDPoPProof, "dpop_jkt differs from the DPoP proof's key")
		}
		form.Set("dpop_jkt", client.DPoPJKT)
	}
	// RFC 9126 §2.1: no request_uri here; the credentials are not
	// parameters of the request.
	if form.Get("request_uri") != "" {
		return nil, oauth.New(oauth.InvalidRequest, "request_uri is not allowed at the pushed authorization request endpoint")
	}
	p := Params{}
	for k, vals := range form {
		switch k {
		case "client_secret", "client_assertion", "client_assertion_type":
		default:
			p[k] = vals
		}
	}
	p["client_id"] = []string{clientID}
	params, _, err := v.unpack(ctx, clientID, p)
	if err != nil {
		return nil, err
	}
	if _, fail := v.check(ctx, params, true); fail != nil {
		return nil, fail.Err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	now := v.now()
	uri := RequestURIPrefix + secrets.RandomToken(32)
	if err := v.Pushed.Push(ctx, session.PushedRequest{URI: uri, ClientID: clientID, Params: raw, CreatedAt: now,
		ExpiresAt: now.Add(PushedTTL)}); err != nil {
		return nil, err
	}
	return &parResponse{RequestURI: uri, ExpiresIn: int64(PushedTTL / time.Second)}, nil
}
