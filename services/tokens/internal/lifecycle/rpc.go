package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	directoryv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/directory/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/clients"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// Limits on what authn passes through from the authorization request.
const (
	maxNonce = 1000
	maxID    = 200
	maxAMR   = 10
)

func invalidArgument(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func failedPrecondition(format string, args ...any) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(format, args...))
}

// unavailable logs a storage or dependency failure and reports it without
// its detail (connect sends an error's message to the caller).
func (l *Lifecycle) unavailable(ctx context.Context, err error) error {
	l.logger().ErrorContext(ctx, "internal token request failed", "err", err)
	return connect.NewError(connect.CodeUnavailable, errors.New("the tokens service could not complete the request; retry"))
}

// rpcClient finds an active OIDC app that may use grant.
func (l *Lifecycle) rpcClient(ctx context.Context, clientID, grant string) (*directoryv1.Client, error) {
	if clientID == "" {
		return nil, invalidArgument("client_id is required")
	}
	c, err := l.Clients.Get(ctx, clientID)
	if errors.Is(err, clients.ErrUnknown) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown client"))
	}
	if err != nil {
		return nil, l.unavailable(ctx, err)
	}
	switch {
	case !c.GetActive():
		return nil, failedPrecondition("the client is not active")
	case c.GetKind() != directoryv1.ClientKind_CLIENT_KIND_OIDC_APP:
		return nil, failedPrecondition("the client is not an OIDC application")
	case !slices.Contains(c.GetGrantTypes(), grant):
		return nil, failedPrecondition("the client may not use the %s grant", grant)
	}
	return c, nil
}

// rpcLogin checks and assembles a completed login passed by authn: a user,
// scopes including openid (offline_access stays; the caller decides), an
// auth_time, and bounded nonce, session id and amr.
func rpcLogin(c *directoryv1.Client, userID, orgID string, scopes []string, nonce, sessionID string, authTime *timestamppb.Timestamp, amr []string) (login, error) {
	return checkLogin(c, userID, orgID, scopes, nonce, sessionID, authTime, amr, true)
}

// checkLogin is rpcLogin; requireOpenID false admits scopes without
// openid (a device authorization asks for any scope).
func checkLogin(c *directoryv1.Client, userID, orgID string, scopes []string, nonce, sessionID string, authTime *timestamppb.Timestamp,
	amr []string, requireOpenID bool) (login, error) {
	switch {
	case userID == "" || len(userID) > maxID:
		return login{}, invalidArgument("user_id is required (at most %d characters)", maxID)
	case len(orgID) > maxID || len(sessionID) > maxID:
		return login{}, invalidArgument("org_id and session_id have at most %d characters", maxID)
	case len(nonce) > maxNonce:
		return login{}, invalidArgument("nonce has at most %d characters", maxNonce)
	case authTime == nil || authTime.CheckValid() != nil:
		return login{}, invalidArgument("auth_time is required")
	case len(amr) > maxAMR:
		return login{}, invalidArgument("amr has at most %d values", maxAMR)
	}
	for _, s := range scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			return login{}, invalidArgument("malformed scope %q", s)
		}
	}
	parsed, err := scope.Parse(strings.Join(scopes, " "))
	if err != nil {
		return login{}, invalidArgument("%s", err.Error())
	}
	if requireOpenID && !slices.Contains(parsed, scope.OpenID) {
		return login{}, invalidArgument("scopes must include openid")
	}
	// authn checks the same policy and answers the browser; this is the
	// second line, so no internal caller can mint past it.
	r := scope.ForClient(c)
	if err := scope.Check(r, parsed); err != nil {
		return login{}, connect.NewError(connect.CodePermissionDenied, err)
	}
	if orgID == "" || !scope.UserOrgAllowed(r, orgID) {
		return login{}, connect.NewError(connect.CodePermissionDenied, errors.New("the client may not sign in users of this organization"))
	}
	return login{client: c, subject: userID, orgID: orgID, scopes: parsed, nonce: nonce, sessionID: sessionID,
		authTime: authTime.AsTime().UTC(), amr: slices.Clone(amr)}, nil
}
