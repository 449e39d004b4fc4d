// Relying-party interop against a real Gatehouse (run by e2e/rp_interop_test.go):
// openid-client for pushed authorization requests (RFC 9126) and the device
// authorization grant (RFC 8628); oauth4webapi's strict checks for PAR and
// signed request objects (RFC 9101). A person's sign-in is done by the Go
// side's helper (GATEHOUSE_RP_HELPER): /login?url= signs the admin in and
// answers the callback URL; /approve?url= approves a device code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as client from 'openid-client';
import * as oauth from 'oauth4webapi';

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} is not set`);
  return v;
};
const issuer = new URL(env('GATEHOUSE_RP_ISSUER'));
const helper = env('GATEHOUSE_RP_HELPER');
const redirectURI = env('GATEHOUSE_RP_REDIRECT_URI');
const insecure = { execute: [client.allowInsecureRequests] }; // the test issuer is http://127.0.0.1

async function signIn(url) {
  const res = await fetch(`${helper}/login?url=${encodeURIComponent(url)}`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return new URL(text);
}

test('openid-client: a PAR-only app signs in through a pushed request', async () => {
  const config = await client.discovery(issuer, env('GATEHOUSE_RP_PAR_CLIENT_ID'), undefined,
    client.ClientSecretBasic(env('GATEHOUSE_RP_PAR_CLIENT_SECRET')), insecure);
  const md = config.serverMetadata();
  assert.equal(md.pushed_authorization_request_endpoint, `${issuer.href.replace(/\/$/, '')}/oauth/v2/par`);
  assert.equal(md.authorization_response_iss_parameter_supported, true);

  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const params = {
    redirect_uri: redirectURI, scope: 'openid profile', state, nonce,
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  };
  // The app requires pushed requests: a plain one is refused on Gatehouse's page.
  const plain = await fetch(client.buildAuthorizationUrl(config, params), { redirect: 'manual' });
  assert.equal(plain.status, 400);
  assert.match(await plain.text(), /must be pushed/);

  const url = await client.buildAuthorizationUrlWithPAR(config, params);
  assert.match(url.searchParams.get('request_uri'), /^urn:ietf:params:oauth:request_uri:/);
  assert.deepEqual([...url.searchParams.keys()].sort(), ['client_id', 'request_uri']);
  const callback = await signIn(url.href);
  const tokens = await client.authorizationCodeGrant(config, callback,
    { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  assert.ok(tokens.access_token);
  assert.ok(tokens.claims().sub);
  // The request_uri worked once.
  const again = await fetch(url, { redirect: 'manual' });
  assert.equal(again.status, 400);
  assert.match(await again.text(), /invalid_request_uri/);
});

test('openid-client: the device authorization grant', async () => {
  const config = await client.discovery(issuer, env('GATEHOUSE_RP_DEVICE_CLIENT_ID'), undefined, client.None(), insecure);
  const da = await client.initiateDeviceAuthorization(config, { scope: 'openid profile offline_access' });
  assert.match(da.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  assert.equal(da.verification_uri, `${issuer.href.replace(/\/$/, '')}/device`);
  const approved = await fetch(`${helper}/approve?url=${encodeURIComponent(da.verification_uri_complete)}`);
  assert.equal(approved.status, 200, await approved.text());
  const tokens = await client.pollDeviceAuthorizationGrant(config, da);
  assert.ok(tokens.access_token);
  assert.ok(tokens.refresh_token);
  assert.ok(tokens.claims().sub);
});

// oauth4webapi: the client's RSA key (PKCS #8, base64) registered under kid.
async function jarClient() {
  const as = await oauth.processDiscoveryResponse(issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oidc', [oauth.allowInsecureRequests]: true }));
  assert.deepEqual(as.request_object_signing_alg_values_supported, ['RS256', 'ES256', 'EdDSA']);
  assert.equal(as.request_parameter_supported, true);
  const der = Buffer.from(env('GATEHOUSE_RP_JAR_KEY'), 'base64');
  const key = await crypto.subtle.importKey('pkcs8', der, { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, false, ['sign']);
  const privateKey = { key, kid: env('GATEHOUSE_RP_JAR_KID') };
  return { as, c: { client_id: env('GATEHOUSE_RP_JAR_CLIENT_ID') }, privateKey, auth: oauth.PrivateKeyJwt(privateKey) };
}

async function codeFlow({ as, c, auth }, authURL, state, nonce, verifier) {
  const callback = await signIn(authURL.href);
  const params = oauth.validateAuthResponse(as, c, callback, state); // iss (RFC 9207), state
  const res = await oauth.authorizationCodeGrantRequest(as, c, auth, params, redirectURI, verifier,
    { [oauth.allowInsecureRequests]: true });
  const result = await oauth.processAuthorizationCodeResponse(as, c, res, { expectedNonce: nonce, requireIdToken: true });
  assert.ok(result.access_token);
  assert.ok(oauth.getValidatedIdTokenClaims(result).sub);
}

function requestParams(state, nonce, challenge) {
  return new URLSearchParams({
    redirect_uri: redirectURI, scope: 'openid', response_type: 'code', state, nonce,
    code_challenge: challenge, code_challenge_method: 'S256',
  });
}

test('oauth4webapi: a signed request object, pushed with private_key_jwt', async () => {
  const jc = await jarClient();
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const request = await oauth.issueRequestObject(jc.as, jc.c,
    requestParams(state, nonce, await oauth.calculatePKCECodeChallenge(verifier)), jc.privateKey);
  const res = await oauth.pushedAuthorizationRequest(jc.as, jc.c, jc.auth, new URLSearchParams({ request }),
    { [oauth.allowInsecureRequests]: true });
  const par = await oauth.processPushedAuthorizationResponse(jc.as, jc.c, res);
  assert.equal(par.expires_in, 60);
  const authURL = new URL(jc.as.authorization_endpoint);
  authURL.searchParams.set('client_id', jc.c.client_id);
  authURL.searchParams.set('request_uri', par.request_uri);
  await codeFlow(jc, authURL, state, nonce, verifier);
});

test('oauth4webapi: a signed request object at the authorization endpoint', async () => {
  const jc = await jarClient();
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const request = await oauth.issueRequestObject(jc.as, jc.c,
    requestParams(state, nonce, await oauth.calculatePKCECodeChallenge(verifier)), jc.privateKey);
  const authURL = new URL(jc.as.authorization_endpoint);
  authURL.searchParams.set('client_id', jc.c.client_id);
  authURL.searchParams.set('request', request);
  await codeFlow(jc, authURL, state, nonce, verifier);
});
