package dpop

import "context"

type keyContext struct{}

// WithKey returns ctx carrying jkt, the key a token request proved
// possession of: the token endpoint sets it, and every access token
// minted for the request (and a public client's refresh token) is bound
// to it. Carried by the request's context because every grant mints.
func WithKey(ctx context.Context, jkt string) context.Context {
	return context.WithValue(ctx, keyContext{}, jkt)
}

// Key returns the proven key's thumbprint ctx carries, "" for none (a
// bearer request).
func Key(ctx context.Context) string {
	jkt, _ := ctx.Value(keyContext{}).(string)
	return jkt
}
