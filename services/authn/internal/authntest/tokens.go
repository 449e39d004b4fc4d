package authntest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
)

// Hint is an id_token_hint the fake tokens service knows.
type Hint struct {
	Resp    *tokensv1.VerifyIDTokenHintResponse
	Expired bool
}

// Tokens is a fake of the tokens internal API: it records the codes and
// implicit tokens asked for, knows a table of id_token_hints, and records
// revoked sessions.
type Tokens struct {
	mu       sync.Mutex
	Codes    map[string]*tokensv1.CreateAuthorizationCodeRequest
	Implicit []*tokensv1.CreateImplicitTokensRequest
	Hints    map[string]Hint
	Revoked  []string
	n        int
	// Down makes code and token creation fail with Unavailable.
	Down bool
	// Devices are pending device authorizations by user code (as the
	// device shows it); Decisions the decisions recorded, by id.
	Devices   map[string]*tokensv1.GetDeviceAuthorizationResponse
	Decisions map[string]*tokensv1.DecideDeviceAuthorizationRequest
	// Secrets are confidential clients' secrets; RequestObjects the claims
	// of request objects that verify (each once).
	Secrets        map[string]string
	RequestObjects map[string][]byte
}

// NewTokens returns an empty fake.
func NewTokens() *Tokens {
	return &Tokens{Codes: map[string]*tokensv1.CreateAuthorizationCodeRequest{}, Hints: map[string]Hint{},
		Devices: map[string]*tokensv1.GetDeviceAuthorizationResponse{}, Decisions: map[string]*tokensv1.DecideDeviceAuthorizationRequest{},
		Secrets: map[string]string{}, RequestObjects: map[string][]byte{}}
}

// CreateAuthorizationCode implements the tokens API.
func (t *Tokens) CreateAuthorizationCode(_ context.Context, r *tokensv1.CreateAuthorizationCodeRequest) (*tokensv1.CreateAuthorizationCodeResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Down {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("tokens down"))
	}
	t.n++
	code := "code-" + strconv.Itoa(t.n)
	t.Codes[code] = r
	return &tokensv1.CreateAuthorizationCodeResponse{Code: code}, nil
}

// CreateImplicitTokens implements the tokens API: the "ID token" names
// the subject, nonce and session so tests can read them back.
func (t *Tokens) CreateImplicitTokens(_ context.Context, r *tokensv1.CreateImplicitTokensRequest) (*tokensv1.CreateImplicitTokensResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Implicit = append(t.Implicit, r)
	m := r
	out := &tokensv1.CreateImplicitTokensResponse{IdToken: "idt." + m.GetUserId() + "." + m.GetNonce() + "." + m.GetSessionId(), TokenType: "Bearer", Scope: "openid"}
	if m.GetResponseType() == "id_token token" {
		out.AccessToken, out.ExpiresIn = "at."+m.GetUserId(), 3600
	}
	return out, nil
}

// VerifyIDTokenHint implements the tokens API.
func (t *Tokens) VerifyIDTokenHint(_ context.Context, r *tokensv1.VerifyIDTokenHintRequest) (*tokensv1.VerifyIDTokenHintResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.Hints[r.GetIdToken()]
	if !ok || (h.Expired && !r.GetAllowExpired()) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id_token_hint does not verify"))
	}
	return h.Resp, nil
}

// RevokeSession implements the tokens API.
func (t *Tokens) RevokeSession(_ context.Context, r *tokensv1.RevokeSessionRequest) (*tokensv1.RevokeSessionResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Revoked = append(t.Revoked, r.GetSessionId())
	return &tokensv1.RevokeSessionResponse{}, nil
}

// AddHint registers an ID token the fake verifies.
func (t *Tokens) AddHint(token, subject, clientID, sessionID string, expired bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Hints[token] = Hint{Resp: &tokensv1.VerifyIDTokenHintResponse{Subject: subject, ClientId: clientID, SessionId: sessionID, ExpiresAt: timestamppb.Now()}, Expired: expired}
}

// Code returns the request a code was created for.
func (t *Tokens) Code(code string) *tokensv1.CreateAuthorizationCodeRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Codes[code]
}

// RevokedSessions returns the revoked session ids.
func (t *Tokens) RevokedSessions() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.Revoked...)
}

// LastSessionFromIDToken reads the fake ID token's session id.
func LastSessionFromIDToken(idToken string) string {
	for i := len(idToken) - 1; i >= 0; i-- {
		if idToken[i] == '.' {
			return idToken[i+1:]
		}
	}
	return ""
}

// AddDevice makes a pending device authorization of clientID for scopes
// with userCode (XXXX-XXXX) and returns its id.
func (t *Tokens) AddDevice(userCode, clientID string, scopes ...string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	id := "device-" + strconv.Itoa(t.n)
	t.Devices[userCode] = &tokensv1.GetDeviceAuthorizationResponse{DeviceId: id, ClientId: clientID, Scopes: scopes, UserCode: userCode}
	return id
}

// Decision returns the decision recorded for a device authorization.
func (t *Tokens) Decision(id string) *tokensv1.DecideDeviceAuthorizationRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Decisions[id]
}

// GetDeviceAuthorization implements the tokens API: the code as shown,
// in any case; an authorization decided already is gone.
func (t *Tokens) GetDeviceAuthorization(_ context.Context, r *tokensv1.GetDeviceAuthorizationRequest) (*tokensv1.GetDeviceAuthorizationResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.Devices[strings.ToUpper(r.GetUserCode())]; ok && t.Decisions[d.GetDeviceId()] == nil {
		return d, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no pending device authorization"))
}

// DecideDeviceAuthorization implements the tokens API: once per id.
func (t *Tokens) DecideDeviceAuthorization(_ context.Context, r *tokensv1.DecideDeviceAuthorizationRequest) (*tokensv1.DecideDeviceAuthorizationResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Decisions[r.GetDeviceId()] != nil {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("decided already"))
	}
	t.Decisions[r.GetDeviceId()] = r
	return &tokensv1.DecideDeviceAuthorizationResponse{}, nil
}

// AuthenticateClient implements the tokens API: a client of Secrets with
// its secret (Basic or post), or any other client_id as a public client.
func (t *Tokens) AuthenticateClient(_ context.Context, r *tokensv1.AuthenticateClientRequest) (*tokensv1.AuthenticateClientResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, secret := r.GetClientId(), r.GetClientSecret()
	if r.GetBasic() {
		id, secret = r.GetBasicUser(), r.GetBasicPassword()
	}
	want, confidential := t.Secrets[id]
	switch {
	case id == "":
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("client authentication is required"))
	case confidential && secret != want, !confidential && secret != "":
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("client authentication failed"))
	}
	return &tokensv1.AuthenticateClientResponse{ClientId: id}, nil
}

// VerifyRequestObject implements the tokens API: the claims RequestObjects
// has for the raw object, once.
func (t *Tokens) VerifyRequestObject(_ context.Context, r *tokensv1.VerifyRequestObjectRequest) (*tokensv1.VerifyRequestObjectResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	claims, ok := t.RequestObjects[r.GetRequest()]
	if !ok {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signature: unknown object"))
	}
	delete(t.RequestObjects, r.GetRequest())
	return &tokensv1.VerifyRequestObjectResponse{Claims: claims}, nil
}
