package suite

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-id/gatehouse/bench/internal/load"
)

// dpopProver signs DPoP proofs (RFC 9449 §4) with one P-256 key, as a
// client does: a fresh jti per request.
type dpopProver struct {
	key    *ecdsa.PrivateKey
	header string // base64url of the protected header (typ, alg, jwk)
	ready  chan string
}

// proofPool is how many proofs a scenario signs before it runs: the
// bench's own signing would otherwise take CPU from the server it
// measures (two cores). Each is used within seconds, well inside a
// proof's minute; past the pool, proofs are signed per request.
const proofPool = 24000

// fill signs n proofs for method and u ahead.
func (p *dpopProver) fill(n int, method, u string) error {
	p.ready = make(chan string, n)
	for range n {
		proof, err := p.proof(method, u)
		if err != nil {
			return err
		}
		p.ready <- proof
	}
	return nil
}

// next is a proof signed ahead, or a new one.
func (p *dpopProver) next(method, u string) (string, error) {
	select {
	case proof := <-p.ready:
		return proof, nil
	default:
		return p.proof(method, u)
	}
}

func newDPoPProver() (*dpopProver, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	h, err := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": map[string]string{
		"kty": "EC", "crv": "P-256", "x": b64(k.X.FillBytes(make([]byte, 32))), "y": b64(k.Y.FillBytes(make([]byte, 32)))}})
	if err != nil {
		return nil, err
	}
	return &dpopProver{key: k, header: b64(h)}, nil
}

// proof is a proof for method and u.
func (p *dpopProver) proof(method, u string) (string, error) {
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{"jti": base64.RawURLEncoding.EncodeToString(jti), "htm": method, "htu": u,
		"iat": time.Now().Unix()})
	if err != nil {
		return "", err
	}
	input := p.header + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, p.key, digest[:])
	if err != nil {
		return "", err
	}
	sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// tokenDPoPOp is token-opaque with a DPoP proof per request: the server
// checks the proof (signature, claims, one replay-store write) and binds
// the token. Against token-opaque in the same run, it is the proof check's
// cost.
func tokenDPoPOp(ctx context.Context, c *http.Client, t Target, cr Credentials) (load.Op, error) {
	p, err := newDPoPProver()
	if err != nil {
		return nil, err
	}
	u := t.Base + "/oauth/v2/token"
	if err := p.fill(proofPool, http.MethodPost, u); err != nil {
		return nil, err
	}
	req := func(ctx context.Context) (*http.Request, error) {
		r, err := formRequest(u, cr.basic(), "grant_type=client_credentials")(ctx)
		if err != nil {
			return nil, err
		}
		proof, err := p.next(http.MethodPost, u)
		if err != nil {
			return nil, err
		}
		r.Header.Set("DPoP", proof)
		return r, nil
	}
	check := func(body []byte) error {
		var tok struct {
			TokenType string `json:"token_type"`
		}
		if err := json.Unmarshal(body, &tok); err != nil || tok.TokenType != "DPoP" {
			return fmt.Errorf("not a DPoP token response: %.100s", body)
		}
		return nil
	}
	// Probe once: a server without DPoP answers Bearer (or an error).
	probe, err := req(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.Do(probe)
	if err != nil {
		return nil, err
	}
	body, _ := readAll(res)
	if res.StatusCode != http.StatusOK || check(body) != nil {
		return nil, &notAvailable{fmt.Sprintf("the token endpoint does not bind to DPoP proofs (%d %.100s)", res.StatusCode, body)}
	}
	return load.RequestOp(c, req, check), nil
}

// introspectDPoPOp is introspect-jwt of a DPoP-bound JWT access token:
// the binding is reported (cnf.jkt, token_type DPoP) from the token alone.
func introspectDPoPOp(ctx context.Context, c *http.Client, t Target, f *Fixture) (load.Op, error) {
	p, err := newDPoPProver()
	if err != nil {
		return nil, err
	}
	u := t.Base + "/oauth/v2/token"
	r, err := formRequest(u, f.JWTClient.basic(), url.Values{"grant_type": {"client_credentials"},
		"scope": {"urn:gatehouse:iam:org:project:id:" + f.ProjectID + ":aud"}}.Encode())(ctx)
	if err != nil {
		return nil, err
	}
	proof, err := p.proof(http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	r.Header.Set("DPoP", proof)
	res, err := c.Do(r)
	if err != nil {
		return nil, err
	}
	body, _ := readAll(res)
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || res.StatusCode != http.StatusOK || tok.TokenType != "DPoP" ||
		strings.Count(tok.AccessToken, ".") != 2 {
		return nil, &notAvailable{fmt.Sprintf("no DPoP-bound JWT access token (%d %.100s)", res.StatusCode, body)}
	}
	req := formRequest(t.Base+"/oauth/v2/introspect", f.API.basic(), url.Values{"token": {tok.AccessToken}}.Encode())
	return load.RequestOp(c, req, func(body []byte) error {
		var r struct {
			Active    bool              `json:"active"`
			TokenType string            `json:"token_type"`
			Cnf       map[string]string `json:"cnf"`
		}
		if err := json.Unmarshal(body, &r); err != nil || !r.Active || r.TokenType != "DPoP" || r.Cnf["jkt"] == "" {
			return fmt.Errorf("token not reported active and DPoP-bound: %.100s", body)
		}
		return nil
	}), nil
}

// readAll reads and closes a response's body (at most 1 MiB).
func readAll(res *http.Response) ([]byte, error) {
	defer res.Body.Close()
	return io.ReadAll(io.LimitReader(res.Body, 1<<20))
}
