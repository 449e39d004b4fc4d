// DPoP (RFC 9449) interop against a real Gatehouse that requires server
// nonces (run by e2e/rp_interop_test.go, TestRPDPoP): openid-client and
// oauth4webapi bind the code flow's tokens to their keys, retry with the
// DPoP-Nonce Gatehouse hands out, call userinfo and refresh with proofs;
// resource-server.mjs checks a bound token with jose alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from 'openid-client';
import * as oauth from 'oauth4webapi';
import { resourceServer } from './resource-server.mjs';

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} is not set`);
  return v;
};
const issuer = new URL(env('GATEHOUSE_RP_ISSUER'));
const helper = env('GATEHOUSE_RP_HELPER');
const redirectURI = env('GATEHOUSE_RP_REDIRECT_URI');
const clientID = env('GATEHOUSE_RP_DPOP_CLIENT_ID');
const insecure = { execute: [client.allowInsecureRequests] };

async function signIn(url) {
  const res = await fetch(`${helper}/login?url=${encodeURIComponent(url)}`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return new URL(text);
}

test('openid-client: DPoP-bound tokens with server nonces', async () => {
  const config = await client.discovery(issuer, clientID, undefined, client.None(), insecure);
  assert.deepEqual(config.serverMetadata().dpop_signing_alg_values_supported, ['ES256', 'RS256', 'PS256', 'EdDSA']);
  const keyPair = await client.randomDPoPKeyPair('ES256');
  const DPoP = client.getDPoPHandle(config, keyPair);
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const callback = await signIn(client.buildAuthorizationUrl(config, {
    redirect_uri: redirectURI, scope: 'openid profile offline_access', state,
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  }).href);
  const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state },
    undefined, { DPoP });
  assert.equal(tokens.token_type, 'dpop');
  const sub = tokens.claims().sub;
  const info = await client.fetchUserInfo(config, tokens.access_token, sub, { DPoP });
  assert.equal(info.sub, sub);
  // The public client's refresh token is bound: another key is refused.
  const other = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
  await assert.rejects(client.refreshTokenGrant(config, tokens.refresh_token, undefined, { DPoP: other }),
    (err) => err.error === 'invalid_grant');
  const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token, undefined, { DPoP });
  assert.equal(refreshed.token_type, 'dpop');
  // A bound token is worth nothing as a bearer token.
  const bearer = await fetch(new URL('/oidc/v1/userinfo', issuer), { headers: { authorization: `Bearer ${refreshed.access_token}` } });
  assert.equal(bearer.status, 401);
  assert.match(bearer.headers.get('www-authenticate'), /DPoP .*error="invalid_token"/);
});

test('oauth4webapi: DPoP-bound tokens, nonce retries, and a resource server checking cnf.jkt and ath with jose', async () => {
  const as = await oauth.processDiscoveryResponse(issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oidc', [oauth.allowInsecureRequests]: true }));
  const c = { client_id: clientID };
  const auth = oauth.None();
  const keyPair = await oauth.generateKeyPair('ES256');
  const DPoP = oauth.DPoP(c, keyPair);
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const authURL = new URL(as.authorization_endpoint);
  for (const [k, v] of Object.entries({ client_id: clientID, redirect_uri: redirectURI, response_type: 'code',
    scope: 'openid', state, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' })) {
    authURL.searchParams.set(k, v);
  }
  const params = oauth.validateAuthResponse(as, c, await signIn(authURL.href), state);
  const opts = { DPoP, [oauth.allowInsecureRequests]: true };
  const grant = () => oauth.authorizationCodeGrantRequest(as, c, auth, params, redirectURI, verifier, opts);
  let result;
  try {
    result = await oauth.processAuthorizationCodeResponse(as, c, await grant());
    assert.fail('the first token request had no nonce and should have been asked for one');
  } catch (err) {
    assert.ok(oauth.isDPoPNonceError(err), String(err));
    result = await oauth.processAuthorizationCodeResponse(as, c, await grant()); // the nonce is cached by the handle
  }
  assert.equal(result.token_type, 'dpop');

  const url = new URL('/oidc/v1/userinfo', issuer);
  const info = await oauth.userInfoRequest(as, c, result.access_token, opts);
  assert.equal((await info.json()).sub !== undefined, true);

  // The resource server: a request with the key's proof passes, one with
  // another key's proof is refused.
  const check = resourceServer(issuer.href.replace(/\/$/, ''), clientID);
  const proofFor = async (kp) => {
    const handle = oauth.DPoP(c, kp);
    const req = new Request(url, { headers: { authorization: `DPoP ${result.access_token}` } });
    // protectedResourceRequest signs the proof; catch it in a fetch hook.
    let proof;
    await oauth.protectedResourceRequest(result.access_token, 'GET', url, undefined, undefined, {
      DPoP: handle, [oauth.allowInsecureRequests]: true,
      [oauth.customFetch]: async (u, init) => { proof = new Headers(init.headers).get('dpop'); return new Response('{}'); },
    });
    return { method: 'GET', url: url.href, authorization: req.headers.get('authorization'), dpop: proof };
  };
  const at = await check(await proofFor(keyPair));
  assert.ok(at.cnf.jkt);
  await assert.rejects(check(await proofFor(await oauth.generateKeyPair('ES256'))), /cnf.jkt/);
});
