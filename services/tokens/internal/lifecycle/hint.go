package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	tokensv1 "github.com/gatehouse-id/gatehouse/pkg/gen/gatehouse/tokens/v1"
	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

// hintClaims are the ID token claims an id_token_hint, or a token
// exchange's ID token, is read for.
type hintClaims struct {
	Issuer   string                    `json:"iss"`
	Subject  string                    `json:"sub"`
	AZP      string                    `json:"azp"`
	Audience accesstoken.Audience      `json:"aud"`
	Expiry   *int64                    `json:"exp"`
	IssuedAt int64                     `json:"iat"`
	AuthTime *int64                    `json:"auth_time"`
	SID      string                    `json:"sid"`
	AMR      []string                  `json:"amr"`
	Act      json.RawMessage           `json:"act"`
	Cnf      *accesstoken.Confirmation `json:"cnf"`
}

var errBadHint = connect.NewError(connect.CodeInvalidArgument, errors.New("id_token_hint is not a valid ID token of this issuer"))

// VerifyIDTokenHint implements TokenService.VerifyIDTokenHint (see the
// proto). The hint must be one of our ID tokens: signed by a published
// key, iss ours, with sub, exp and azp — every ID token we issue has azp,
// our JWT access tokens have none, so an access token is not accepted.
// Every refusal is the same InvalidArgument, so the answer says nothing
// about why.
func (l *Lifecycle) VerifyIDTokenHint(_ context.Context, req *tokensv1.VerifyIDTokenHintRequest) (*tokensv1.VerifyIDTokenHintResponse, error) {
	payload, err := l.Keys.Verify(req.GetIdToken())
	if err != nil {
		return nil, errBadHint
	}
	var c hintClaims
	if json.Unmarshal(payload, &c) != nil || c.Issuer != l.Issuer || c.Subject == "" || c.AZP == "" || c.Expiry == nil {
		return nil, errBadHint
	}
	exp := time.Unix(*c.Expiry, 0).UTC()
	if !req.GetAllowExpired() && !l.Now().Before(exp) {
		return nil, errBadHint
	}
	out := &tokensv1.VerifyIDTokenHintResponse{
		Subject:   c.Subject,
		ClientId:  c.AZP,
		SessionId: c.SID,
		ExpiresAt: timestamppb.New(exp),
	}
	if c.AuthTime != nil {
		out.AuthTime = timestamppb.New(time.Unix(*c.AuthTime, 0).UTC())
	}
	return out, nil
}
