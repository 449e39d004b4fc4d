package accesstoken_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/gatehouse-id/gatehouse/services/tokens/accesstoken"
)

// noRevocations is a revocation list with nothing in it.
type noRevocations struct{}

func (noRevocations) TokenRevoked(context.Context, string, string, time.Time) (bool, error) {
	return false, nil
}

// noOpaque knows no opaque tokens.
type noOpaque struct{}

func (noOpaque) Lookup(context.Context, string) (*accesstoken.Token, error) {
	return nil, accesstoken.ErrInactive
}

// A resource server verifies Gatehouse access tokens for its own audience.
// Away from the tokens service, accesstoken.NewRemote wires the same
// Verifier to the key set, introspection and revocation list the tokens
// service publishes; here the key set is a local one.
func ExampleVerifier() {
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	key, _ := jwk.Import(priv)
	_ = key.Set(jwk.KeyIDKey, "k1")
	_ = key.Set(jwk.AlgorithmKey, jwa.ES256())
	pub, _ := key.PublicKey()
	set := jwk.NewSet()
	_ = set.AddKey(pub)

	now := time.Now()
	claims, _ := json.Marshal(accesstoken.Claims{Issuer: "https://id.example.com", Subject: "alice",
		Audience: accesstoken.Audience{"orders-api"}, JTI: "t1", ClientID: "shop",
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Scope: "openid orders"})
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, "k1")
	_ = hdr.Set(jws.TypeKey, "at+jwt")
	token, _ := jws.Sign(claims, jws.WithKey(jwa.ES256(), key, jws.WithProtectedHeaders(hdr)))

	v := &accesstoken.Verifier{
		Issuer:   "https://id.example.com",
		Audience: "orders-api",
		Keys: accesstoken.KeysFunc(func(_ context.Context, token string) ([]byte, error) {
			return jws.Verify([]byte(token), jws.WithKeySet(set, jws.WithRequireKid(true)))
		}),
		Opaque:  noOpaque{},
		Revoked: noRevocations{},
	}
	t, err := v.Verify(context.Background(), string(token))
	fmt.Println(t.Subject, t.ClientID, t.Scopes, err)

	v.Audience = "billing-api"
	_, err = v.Verify(context.Background(), string(token))
	fmt.Println(err)
	// Output:
	// alice shop [openid orders] <nil>
	// access token inactive
}
