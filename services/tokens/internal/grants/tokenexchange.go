package grants

import (
	"context"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/lifecycle"
	"github.com/gatehouse-id/gatehouse/services/tokens/internal/mint"
	"github.com/gatehouse-id/gatehouse/services/tokens/scope"
)

// tokenExchange is RFC 8693: the rules are lifecycle.Exchange's. Only a
// client that authenticates (not auth method none) exchanges: an OIDC app
// that registered the grant, or a machine user with a secret (the one
// kind of caller that can hold the impersonation role).
type tokenExchange struct{ Deps }

type tokenExchangeParams struct {
	SubjectToken       string `form:"subject_token,required"`
	SubjectTokenType   string `form:"subject_token_type,required"`
	ActorToken         string `form:"actor_token"`
	ActorTokenType     string `form:"actor_token_type"`
	RequestedTokenType string `form:"requested_token_type"`
	Scope              string `form:"scope"`
}

func (g *tokenExchange) handle(ctx context.Context, r *Request[tokenExchangeParams]) (*mint.Response, error) {
	p := r.Params
	req := lifecycle.ExchangeRequest{
		SubjectToken: p.SubjectToken, SubjectTokenType: p.SubjectTokenType,
		ActorToken: p.ActorToken, ActorTokenType: p.ActorTokenType, RequestedTokenType: p.RequestedTokenType,
	}
	if p.Scope != "" {
		scopes, err := scope.Parse(p.Scope)
		if err != nil {
			return nil, err
		}
		req.Scopes = scopes
	}
	for _, k := range []string{"audience", "resource"} {
		for _, v := range r.Lists[k] {
			if v == "" {
				return nil, oauth.New(oauth.InvalidTarget, "%s may not be empty", k)
			}
			req.Targets = append(req.Targets, v)
		}
	}
	return g.Lifecycle.Exchange(ctx, r.Client, req)
}
