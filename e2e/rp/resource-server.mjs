// A resource server that accepts Gatehouse's DPoP-bound JWT access tokens
// (RFC 9449 §7), checked with the jose library alone: the access token's
// signature against the issuer's key set, then the proof (typ dpop+jwt,
// signed by the public key in its header), its htm and htu, its iat, its
// ath (the token's SHA-256) and its key's thumbprint against the token's
// cnf.jkt. A real one also remembers each proof's jti for its window.
import * as jose from 'jose';
import { createHash } from 'node:crypto';

export function resourceServer(issuer, audience) {
  const jwks = jose.createRemoteJWKSet(new URL('/oauth/v2/keys', issuer));
  return async function check({ method, url, authorization, dpop }) {
    const [scheme, token] = (authorization ?? '').split(' ');
    if (scheme !== 'DPoP' || !token) throw new Error('not a DPoP token');
    const { payload: at } = await jose.jwtVerify(token, jwks, { issuer, audience, typ: 'at+jwt' });
    if (!at.cnf?.jkt) throw new Error('the token is not DPoP-bound');
    const { payload: proof, protectedHeader } = await jose.jwtVerify(dpop, jose.EmbeddedJWK,
      { typ: 'dpop+jwt', algorithms: ['ES256', 'RS256', 'PS256', 'EdDSA'], maxTokenAge: '60s' });
    if (proof.htm !== method) throw new Error('htm');
    const u = new URL(url);
    if (proof.htu !== `${u.origin}${u.pathname}`) throw new Error('htu');
    const ath = createHash('sha256').update(token).digest('base64url');
    if (proof.ath !== ath) throw new Error('ath');
    if (await jose.calculateJwkThumbprint(protectedHeader.jwk) !== at.cnf.jkt) throw new Error('cnf.jkt: another key');
    return at;
  };
}
