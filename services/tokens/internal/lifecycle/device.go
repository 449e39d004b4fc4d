package lifecycle

import (
	"context"
	"crypto/rand"
	"errors"
	"math/big"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gatehouse-id/gatehouse/pkg/db"
	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/pkg/secrets"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/kind"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/store"
)

// GrantDeviceCode is the device authorization grant's type (RFC 8628 §3.4),
// as clients register it and send it.
const GrantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// The device flow's defaults (RFC 8628 §3.2: interval defaults to 5 s).
const (
	DefaultDeviceTTL      = 10 * time.Minute
	DefaultDeviceInterval = 5 * time.Second
	// slowDown is what a poll that comes too fast adds to the interval
	// (RFC 8628 §3.5).
	slowDown = 5 * time.Second
	// pollTolerance: a poll this much before the interval is over still
	// counts as waiting the interval (network jitter).
	pollTolerance = time.Second
)

// UserCodeAlphabet is RFC 8628 §6.1's: consonants only, so no word is
// spelled and no vowel is mistaken for a digit; 20^8 codes (34.5 bits),
// with attempts rate limited.
const UserCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// userCodeLen is the number of letters of a user code.
const userCodeLen = 8

// newUserCode draws a user code, without the dash.
func newUserCode() string {
	var b strings.Builder
	n := big.NewInt(int64(len(UserCodeAlphabet)))
	for range userCodeLen {
		i, err := rand.Int(rand.Reader, n)
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		b.WriteByte(UserCodeAlphabet[i.Int64()])
	}
	return b.String()
}

// NormalizeUserCode reads a user code as a person types it: any case,
// with or without the dash and spaces. ok is false when it cannot be a
// user code.
func NormalizeUserCode(typed string) (code string, ok bool) {
	if len(typed) > 32 {
		return "", false
	}
	var b strings.Builder
	for _, r := range strings.ToUpper(typed) {
		switch {
		case r == '-' || r == ' ':
		case strings.ContainsRune(UserCodeAlphabet, r):
			b.WriteRune(r)
		default:
			return "", false
		}
	}
	if b.Len() != userCodeLen {
		return "", false
	}
	return b.String(), true
}

// FormatUserCode shows a normalized user code as XXXX-XXXX.
func FormatUserCode(code string) string {
	if len(code) != userCodeLen {
		return code
	}
	return code[:4] + "-" + code[4:]
}

// DeviceStart is the device authorization response's content (RFC 8628
// §3.2) before the verification URIs are added.
type DeviceStart struct {
	DeviceCode string
	UserCode   string // XXXX-XXXX
	ExpiresIn  int64  // seconds
	Interval   int64  // seconds
}

// StartDevice records a device authorization of client c for scopes
// (checked by the endpoint). A user code already taken by a live
// authorization is drawn again.
func (l *Lifecycle) StartDevice(ctx context.Context, c *directoryv1.Client, scopes []string) (*DeviceStart, error) {
	now := l.Now()
	ttl, interval := l.deviceTTL(), l.deviceInterval()
	for range 5 {
		code, user := kind.NewDeviceCode(), newUserCode()
		err := l.Store.InsertDeviceCode(ctx, &store.DeviceCode{
			ID: secrets.NewTokenID(), DeviceCodeHash: l.Hasher.Hash(code), UserCodeHash: l.userCodeHash(user),
			ClientID: c.GetClientId(), ScopesRaw: store.EncodeScopes(scopes), CreatedAt: now, ExpiresAt: now.Add(ttl),
			Interval: int64(interval / time.Second),
		})
		if errors.Is(err, store.ErrUserCodeTaken) {
			continue
		}
		if err != nil {
			return nil, oauth.New(oauth.TemporarilyUnavailable, "the device authorization could not be recorded").WithCause(err)
		}
		return &DeviceStart{DeviceCode: code, UserCode: FormatUserCode(user), ExpiresIn: int64(ttl / time.Second),
			Interval: int64(interval / time.Second)}, nil
	}
	return nil, oauth.New(oauth.TemporarilyUnavailable, "no free user code was found; try again")
}

func (l *Lifecycle) deviceTTL() time.Duration {
	if l.DeviceTTL > 0 {
		return l.DeviceTTL
	}
	return DefaultDeviceTTL
}

func (l *Lifecycle) deviceInterval() time.Duration {
	if l.DeviceInterval > 0 {
		return l.DeviceInterval
	}
	return DefaultDeviceInterval
}

// userCodeHash keys a normalized user code: a reader of the database
// cannot tell which code approves which device.
func (l *Lifecycle) userCodeHash(code string) []byte {
	return l.Hasher.Hash("device-user-code:" + code)
}

// ExchangeDeviceCode is the device_code grant (RFC 8628 §3.4, §3.5) for
// client c, authenticated already. Its errors are RFC 8628's:
// authorization_pending while the person has not decided, slow_down for a
// poll sooner than the interval (which grows by 5 s), access_denied when
// the person declined, expired_token past the code's lifetime (or once a
// logout voided the approval), and invalid_grant for an unknown code, one
// of another client, or one redeemed already. After approval the tokens
// are those of the code flow, issued exactly once.
func (l *Lifecycle) ExchangeDeviceCode(ctx context.Context, c *directoryv1.Client, deviceCode string) (*mint.Response, error) {
	if deviceCode == "" || len(deviceCode) > maxOpaqueLen || kind.Other(deviceCode, kind.DeviceCode) {
		return nil, oauth.New(oauth.InvalidGrant, "the device code is invalid")
	}
	d, err := l.Store.DeviceCodeByHash(ctx, l.Hasher.Hash(deviceCode))
	if errors.Is(err, store.ErrNotFound) {
		return nil, oauth.New(oauth.InvalidGrant, "the device code is invalid")
	}
	if err != nil {
		return nil, oauth.New(oauth.TemporarilyUnavailable, "the device authorization could not be read").WithCause(err)
	}
	if d.ClientID != c.GetClientId() {
		return nil, oauth.New(oauth.InvalidGrant, "the device code was issued to another client")
	}
	if d.UsedAt != nil {
		return nil, oauth.New(oauth.InvalidGrant, "the device code was already used")
	}
	now := l.Now()
	if !now.Before(d.ExpiresAt) {
		return nil, oauth.New(oauth.ExpiredToken, "the device code has expired")
	}
	switch d.State {
	case store.DeviceDenied:
		return nil, oauth.New(oauth.AccessDenied, "the user denied the authorization")
	case store.DevicePending:
		tooFast, err := l.Store.PollDeviceCode(ctx, d, now, pollTolerance, slowDown)
		if err != nil {
			return nil, oauth.New(oauth.TemporarilyUnavailable, "the poll could not be recorded").WithCause(err)
		}
		if tooFast {
			return nil, oauth.New(oauth.SlowDown, "polling too fast: wait %d seconds between requests", d.Interval+int64(slowDown/time.Second))
		}
		return nil, oauth.New(oauth.AuthorizationPending, "the user has not yet approved the authorization")
	}
	var authTime time.Time
	if d.AuthTime != nil {
		authTime = *d.AuthTime
	}
	lg := login{subject: d.Subject, orgID: d.OrgID, scopes: d.Scopes(), sessionID: d.SessionID, authTime: authTime, amr: d.AMR()}
	res, err := l.redeem(ctx, c, lg, now, func(tx *db.Tx, accessID, familyID string) (bool, error) {
		return l.Store.ClaimDeviceCode(ctx, tx, d.ID, accessID, familyID, now)
	})
	if errors.Is(err, errLost) {
		return nil, oauth.New(oauth.InvalidGrant, "the device code was already used")
	}
	return res, err
}

// GetDeviceAuthorization implements TokenService.GetDeviceAuthorization.
func (l *Lifecycle) GetDeviceAuthorization(ctx context.Context, req *tokensv1.GetDeviceAuthorizationRequest) (*tokensv1.GetDeviceAuthorizationResponse, error) {
	code, ok := NormalizeUserCode(req.GetUserCode())
	if !ok {
		return nil, invalidArgument("a user code is 8 letters of %s", UserCodeAlphabet)
	}
	d, err := l.Store.DeviceCodeByUserCode(ctx, l.userCodeHash(code))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoDevice
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	if d.State != store.DevicePending || !l.Now().Before(d.ExpiresAt) {
		return nil, errNoDevice
	}
	return &tokensv1.GetDeviceAuthorizationResponse{DeviceId: d.ID, ClientId: d.ClientID, Scopes: d.Scopes(),
		ExpiresAt: timestamppb.New(d.ExpiresAt), UserCode: FormatUserCode(code)}, nil
}

var errNoDevice = connect.NewError(connect.CodeNotFound, errors.New("no pending device authorization has this code"))

// DecideDeviceAuthorization implements TokenService.DecideDeviceAuthorization.
func (l *Lifecycle) DecideDeviceAuthorization(ctx context.Context, req *tokensv1.DecideDeviceAuthorizationRequest) (*tokensv1.DecideDeviceAuthorizationResponse, error) {
	m := req
	if m.GetDeviceId() == "" || len(m.GetDeviceId()) > maxID {
		return nil, invalidArgument("device_id is required (at most %d characters)", maxID)
	}
	d, err := l.Store.DeviceCodeByID(ctx, nil, m.GetDeviceId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoDevice
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	decision := &store.DeviceCode{ID: d.ID, State: store.DeviceDenied, AMRRaw: store.EncodeList(nil)}
	if m.GetApprove() {
		c, err := l.rpcClient(ctx, d.ClientID, GrantDeviceCode)
		if err != nil {
			return nil, err
		}
		lg, err := checkLogin(c, m.GetUserId(), m.GetOrgId(), d.Scopes(), "", m.GetSessionId(), m.GetAuthTime(), m.GetAmr(), false)
		if err != nil {
			return nil, err
		}
		decision.State, decision.Subject, decision.OrgID, decision.SessionID = store.DeviceApproved, lg.subject, lg.orgID, lg.sessionID
		decision.AuthTime, decision.AMRRaw = &lg.authTime, store.EncodeList(lg.amr)
	}
	ok, err := l.Store.DecideDeviceCode(ctx, decision, l.Now())
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	if !ok {
		return nil, errNoDevice
	}
	return &tokensv1.DecideDeviceAuthorizationResponse{}, nil
}
