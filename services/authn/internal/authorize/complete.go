package authorize

import (
	"context"
	"errors"
	"net/url"

	"github.com/gatehouse-id/gatehouse/pkg/oauth"
	"github.com/gatehouse-id/gatehouse/services/authn/internal/session"
)

// Complete answers req for the user of s through the tokens service and
// returns the redirect: code and state in the query (RFC 6749 §4.1.2), or
// the implicit tokens in the fragment (OIDC Core §3.2.2.5).
func Complete(ctx context.Context, tokens Tokens, req *Request, s session.Session) (string, *Failure) {
	if req.Device != nil {
		// The device's next poll gets the tokens; the browser a page
		// saying so.
		err := tokens.DecideDevice(ctx, DeviceDecision{ID: req.Device.ID, Approve: true, UserID: s.UserID, OrgID: s.OrgID,
			SessionID: s.ID, AuthTime: s.AuthTime, AMR: s.AMR})
		if errors.Is(err, ErrNoDevice) {
			return "", &Failure{Err: oauth.New(oauth.ExpiredToken, "the device authorization has expired or was decided already")}
		}
		if err != nil {
			return "", req.FailWith(dependencyError("tokens", err))
		}
		lang := ""
		if len(req.UILocales) > 0 {
			lang = req.UILocales[0]
		}
		return DeviceDoneURL(true, lang), nil
	}
	if !req.Implicit() {
		code, err := tokens.CreateAuthorizationCode(ctx, CodeGrant{
			ClientID: req.ClientID, RedirectURI: req.RedirectURI, UserID: s.UserID, OrgID: s.OrgID,
			Scopes: req.Scopes, Nonce: req.Nonce, CodeChallenge: req.CodeChallenge, DPoPJKT: req.DPoPJKT,
			SessionID: s.ID, AuthTime: s.AuthTime, AMR: s.AMR,
		})
		if err != nil {
			return "", req.FailWith(dependencyError("tokens", err))
		}
		return req.Target().URL(url.Values{"code": {code}}), nil
	}
	t, err := tokens.CreateImplicitTokens(ctx, ImplicitGrant{
		ClientID: req.ClientID, UserID: s.UserID, OrgID: s.OrgID, Scopes: req.Scopes, Nonce: req.Nonce,
		SessionID: s.ID, AuthTime: s.AuthTime, AMR: s.AMR, ResponseType: req.ResponseType,
	})
	if err != nil {
		return "", req.FailWith(dependencyError("tokens", err))
	}
	v := url.Values{"id_token": {t.IDToken}, "token_type": {t.TokenType}}
	if t.AccessToken != "" {
		v.Set("access_token", t.AccessToken)
		v.Set("expires_in", formatInt(t.ExpiresIn))
	}
	if t.Scope != "" {
		v.Set("scope", t.Scope)
	}
	return req.Target().URL(v), nil
}

// DeviceDoneURL is the page that tells the person the device's answer, in
// the language of the pages before it (lang, "" for the browser's).
func DeviceDoneURL(approved bool, lang string) string {
	q := url.Values{"result": {"denied"}}
	if approved {
		q.Set("result", "approved")
	}
	if lang != "" {
		q.Set("ui_locales", lang)
	}
	return PathDeviceDone + "?" + q.Encode()
}
