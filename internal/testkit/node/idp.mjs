// A real, certified OpenID provider (oidc-provider) on 127.0.0.1, for tests.
// Started by testkit.StartIDP; not for production use.
//
// Usage: node idp.mjs [--port N] --clients FILE
//   --port     port to listen on (default 0: any free port); env IDP_PORT.
//   --clients  JSON file with the static clients; env IDP_CLIENTS_FILE.
//
// The clients file is an array of
//   {"client_id", "client_secret", "tenant"?, "subject"?, "ttl"?, "alg"?,
//    "claims"?, "token_exchange"?, "refuse_exchange_subjects"?}
// where tenant becomes the "tenant" and "org.tenant" claims (omitted if
// empty), subject replaces "sub" (default: the client_id), ttl is the access
// token lifetime in seconds (default 300), alg is the JWS algorithm of its
// access tokens ("RS256" default, or "ES256"), and claims are merged into the
// access token's claims. token_exchange (default false) lets the client use
// the token exchange grant below; refuse_exchange_subjects lists subjects
// (sub of the subject token) for which the client's exchanges are refused.
//
// Clients use the client_credentials grant, authenticating with
// client_secret_basic or client_secret_post. A token request must name a
// resource (RFC 8707): the access token is then a JWT whose aud is that
// resource, with the requested scopes among "mcp mcp:read mcp:write mcp:admin".
//
// Token exchange (RFC 8693), grant_type
// urn:ietf:params:oauth:grant-type:token-exchange, for clients with
// "token_exchange": true (any other client gets unauthorized_client):
//   subject_token       required: a JWT access token (typ at+jwt) of this
//                       IdP, checked for its signature (this IdP's keys),
//                       iss and exp; else invalid_grant.
//   subject_token_type  required: urn:ietf:params:oauth:token-type:access_token.
//   resource, audience  at least one, each may repeat: the aud of the new
//                       token (a string if one value, else an array).
//   scope               optional, among the scopes above (else
//                       invalid_scope); default: the subject token's scope.
//   actor_token, actor_token_type
//                       optional, as the subject token: the actor's sub
//                       goes in the new token's "act": {"sub": …} (with the
//                       subject token's own act, if any, nested in it).
// The new token is a JWT (typ at+jwt, the exchanging client's alg, signed
// with the same keys, so the same JWKS verifies it) with iss, sub (the
// subject token's), aud, client_id (the exchanging client), scope, tenant
// and org.tenant (copied from the subject token, if there), act, iat, exp
// (the exchanging client's ttl, default 300 s), jti. The answer is as in RFC
// 8693 section 2.2.1: access_token, issued_token_type
// (urn:ietf:params:oauth:token-type:access_token), token_type Bearer,
// expires_in, scope. Missing or bad parameters get invalid_request (a
// resource that is not an absolute URI invalid_target).
// To test refusals, an exchange is refused (invalid_grant) when the subject
// token's sub starts with "refused-", or is listed in the exchanging client's
// refuse_exchange_subjects. These tokens are not stored by oidc-provider:
// its introspection endpoint does not know them.
//
// GET /test/counts answers the number of tokens issued so far, as JSON:
//   {"client_credentials": {"<client_id>": n, …},
//    "token_exchange": {"<client_id> <subject>": n, …}}
// (successful grants only; the key of an exchange is the exchanging client
// and the subject token's sub, separated by one space).
//
// Authorization code (with PKCE S256, always required) and refresh tokens,
// for clients with "redirect_uris" (exact match): the access token is a JWT
// for the resource the request names (RFC 8707), sub the account that
// signed in, ttl as above; every such grant comes with a refresh token.
// Sign-in and consent are HTML forms a test drives as a browser would:
//   GET  /interaction/:uid          a form: login (action .../login,
//                                   field "login": the account id, any
//                                   non-empty string) or consent (action
//                                   .../confirm; .../abort denies)
//   POST /interaction/:uid/login    signs in as "login"
//   POST /interaction/:uid/confirm  grants what was asked
//   POST /interaction/:uid/abort    access_denied
// With scope openid the grant has an ID token too (sub the account), and
// with scope groups its "groups" claim: the account's groups in
// ACCOUNT_GROUPS below ("operator" is in "ops" and "staff"), [] for any
// other account.
// Revocation (RFC 7009) is at revocation_endpoint; introspection too.
// GET /test/counts also has "authorization_code" and "refresh_token" by
// client_id, and "revocation" (grants revoked) by client_id, each once it
// counts something.
//
// Prints "idp listening on http://127.0.0.1:PORT" once ready (the issuer).
// Exits 0 on SIGTERM or SIGINT.

import {
  createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, randomUUID, sign, verify,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

// The scopes every resource server (the gateway) accepts.
export const RESOURCE_SCOPES = 'mcp mcp:read mcp:write mcp:admin';
// The groups of accounts, for the "groups" claim (scope groups).
const ACCOUNT_GROUPS = { operator: ['ops', 'staff'] };
const DEFAULT_TTL = 300;
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.IDP_PORT ?? '0' },
    clients: { type: 'string', default: process.env.IDP_CLIENTS_FILE },
  },
});
if (!args.clients) {
  console.error('idp: --clients FILE (or IDP_CLIENTS_FILE) is required');
  process.exit(2);
}

const clientList = JSON.parse(readFileSync(args.clients, 'utf8'));
if (!Array.isArray(clientList)) {
  console.error('idp: the clients file must hold a JSON array');
  process.exit(2);
}
// Our own per-client properties, by client_id; oidc-provider only gets
// standard client metadata.
const extras = new Map();
for (const c of clientList) {
  if (typeof c.client_id !== 'string' || typeof c.client_secret !== 'string') {
    console.error('idp: each client needs a string client_id and client_secret');
    process.exit(2);
  }
  extras.set(c.client_id, c);
}

// Fresh signing keys for this process: RS256 (the default) and ES256.
function signingKey(type, options, alg) {
  const { privateKey } = generateKeyPairSync(type, options);
  const jwk = privateKey.export({ format: 'jwk' });
  const kid = createHash('sha256').update(jwk.n ?? jwk.x).digest('base64url').slice(0, 16);
  return { ...jwk, kid, alg, use: 'sig' };
}
const jwks = {
  keys: [
    signingKey('rsa', { modulusLength: 2048 }, 'RS256'),
    signingKey('ec', { namedCurve: 'P-256' }, 'ES256'),
  ],
};

function ttlOf(client) {
  const ttl = extras.get(client?.clientId)?.ttl;
  return Number.isSafeInteger(ttl) && ttl > 0 ? ttl : undefined;
}

// The same keys, for the token exchange grant, which signs and checks its
// tokens itself.
const keys = jwks.keys.map((jwk) => {
  const privateKey = createPrivateKey({ key: jwk, format: 'jwk' });
  return {
    kid: jwk.kid, alg: jwk.alg, privateKey, publicKey: createPublicKey(privateKey),
  };
});

// The key argument of crypto's sign and verify: an ES256 JWS signature is
// r||s (IEEE P1363), not DER.
function keyOptions(key, keyObject) {
  return key.alg === 'ES256' ? { key: keyObject, dsaEncoding: 'ieee-p1363' } : keyObject;
}
function b64json(value) {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
function signAccessToken(alg, payload) {
  const key = keys.find((k) => k.alg === alg) ?? keys[0];
  const input = `${b64json({ alg: key.alg, typ: 'at+jwt', kid: key.kid })}.${b64json(payload)}`;
  const signature = sign('sha256', Buffer.from(input), keyOptions(key, key.privateKey));
  return `${input}.${signature.toString('base64url')}`;
}

function isObject(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// The claims of a JWT access token of this IdP, or invalid_grant.
function verifyAccessToken(token, name) {
  const fail = (why) => {
    const err = new errors.InvalidGrant(`${name} ${why}`);
    err.error_description = `${name} ${why}`;
    return err;
  };
  const parts = token.split('.');
  if (parts.length !== 3) throw fail('is not a compact JWS');
  let header;
  let claims;
  try {
    header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
  } catch {
    throw fail('is not a JWT');
  }
  if (!isObject(header) || !isObject(claims)) throw fail('is not a JWT');
  const typ = String(header.typ ?? '').toLowerCase().replace(/^application\//, '');
  if (typ !== 'at+jwt') throw fail('is not a JWT access token (typ at+jwt)');
  const key = keys.find((k) => k.kid === header.kid && k.alg === header.alg);
  if (!key) throw fail('is not signed by a key of this issuer');
  const input = Buffer.from(`${parts[0]}.${parts[1]}`);
  if (!verify('sha256', input, keyOptions(key, key.publicKey), Buffer.from(parts[2], 'base64url'))) {
    throw fail('has a bad signature');
  }
  if (claims.iss !== issuer) throw fail('is not from this issuer');
  if (typeof claims.exp !== 'number' || claims.exp <= Date.now() / 1000) throw fail('has expired');
  if (typeof claims.sub !== 'string' || claims.sub === '') throw fail('has no sub');
  return claims;
}

function invalidRequest(description) {
  return new errors.InvalidRequest(description);
}

// A parameter that may repeat, as a list.
function list(value) {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

// Tokens issued, for GET /test/counts; exchangeSubjects carries the subject
// of an exchange from its handler to the grant.success event.
const counts = {
  client_credentials: {}, token_exchange: {}, authorization_code: {}, refresh_token: {}, revocation: {},
};
const exchangeSubjects = new WeakMap();

// The token exchange grant (RFC 8693); see the header.
async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  const extra = extras.get(client.clientId) ?? {};
  if (extra.token_exchange !== true) {
    throw new errors.UnauthorizedClient('this client may not use token exchange');
  }
  if (!params.subject_token) throw invalidRequest("missing required parameter 'subject_token'");
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw invalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.actor_token !== undefined && params.actor_token_type !== ACCESS_TOKEN_TYPE) {
    throw invalidRequest(`actor_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.actor_token === undefined && params.actor_token_type !== undefined) {
    throw invalidRequest('actor_token_type without actor_token');
  }
  const resources = list(params.resource);
  const audiences = [...resources, ...list(params.audience)];
  if (audiences.length === 0 || audiences.some((a) => a === '')) {
    throw invalidRequest('a resource or audience parameter is required');
  }
  for (const r of resources) {
    if (!URL.canParse(r) || r.includes('#')) {
      throw new errors.InvalidTarget('resource must be an absolute URI without a fragment');
    }
  }
  let scope;
  if (params.scope !== undefined) {
    const known = new Set(RESOURCE_SCOPES.split(' '));
    const requested = params.scope.split(' ').filter(Boolean);
    const unknown = requested.filter((s) => !known.has(s));
    if (unknown.length > 0) {
      throw new errors.InvalidScope('requested scope is not allowed', unknown.join(' '));
    }
    scope = [...new Set(requested)].join(' ');
  }

  const subject = verifyAccessToken(params.subject_token, 'subject_token');
  const actor = params.actor_token === undefined
    ? undefined : verifyAccessToken(params.actor_token, 'actor_token');
  const refused = Array.isArray(extra.refuse_exchange_subjects)
    && extra.refuse_exchange_subjects.includes(subject.sub);
  if (subject.sub.startsWith('refused-') || refused) {
    const err = new errors.InvalidGrant();
    err.error_description = `subject ${subject.sub} may not be exchanged`;
    throw err;
  }
  if (scope === undefined && typeof subject.scope === 'string') scope = subject.scope;

  const now = Math.floor(Date.now() / 1000);
  const ttl = ttlOf(client) ?? DEFAULT_TTL;
  const claims = {
    iss: issuer,
    sub: subject.sub,
    aud: audiences.length === 1 ? audiences[0] : audiences,
    client_id: client.clientId,
    ...(scope ? { scope } : {}),
    iat: now,
    exp: now + ttl,
    jti: randomUUID(),
  };
  if (typeof subject.tenant === 'string') claims.tenant = subject.tenant;
  if (isObject(subject.org) && typeof subject.org.tenant === 'string') {
    claims.org = { tenant: subject.org.tenant };
  }
  if (actor) {
    claims.act = { sub: actor.sub, ...(isObject(subject.act) ? { act: subject.act } : {}) };
  } else if (isObject(subject.act)) {
    claims.act = subject.act;
  }

  exchangeSubjects.set(ctx, subject.sub);
  ctx.body = {
    access_token: signAccessToken(extra.alg ?? 'RS256', claims),
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: ttl,
    ...(scope ? { scope } : {}),
  };
}

// Open the socket first, so that port 0 works and the issuer carries the
// real port.
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(args.port), '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: clientList.map((c) => {
    const code = Array.isArray(c.redirect_uris) && c.redirect_uris.length > 0;
    return {
      client_id: c.client_id,
      client_secret: c.client_secret,
      // Every client may ask; tokenExchange refuses those without
      // token_exchange, with unauthorized_client.
      grant_types: ['client_credentials', TOKEN_EXCHANGE, ...(code ? ['authorization_code', 'refresh_token'] : [])],
      response_types: code ? ['code'] : [],
      redirect_uris: code ? c.redirect_uris : [],
      token_endpoint_auth_method: 'client_secret_basic',
    };
  }),
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id, groups: Object.hasOwn(ACCOUNT_GROUPS, id) ? ACCOUNT_GROUPS[id] : [] }) }),
  claims: {
    acr: null, sid: null, auth_time: null, iss: null, openid: ['sub'], groups: ['groups'],
  },
  // The ID token of a code grant carries the claims of its scopes (groups)
  // too, not only sub.
  conformIdTokenClaims: false,
  interactions: { url: async (ctx, interaction) => `/interaction/${interaction.uid}` },
  pkce: { required: () => true },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  jwks,
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  scopes: ['openid', 'groups', ...RESOURCE_SCOPES.split(' ')],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No default: a token request must name its resource.
      defaultResource: async () => undefined,
      // A refresh (or code) request without one gets the granted one.
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resourceIndicator, client) => {
        const info = {
          scope: RESOURCE_SCOPES,
          audience: resourceIndicator,
          accessTokenFormat: 'jwt',
          accessTokenTTL: ttlOf(client) ?? DEFAULT_TTL,
        };
        const alg = extras.get(client?.clientId)?.alg;
        if (alg) info.jwt = { sign: { alg } };
        return info;
      },
    },
  },
  ttl: {
    ClientCredentials: (ctx, token, client) =>
      ttlOf(client) ?? token.resourceServer?.accessTokenTTL ?? DEFAULT_TTL,
    AccessToken: (ctx, token, client) =>
      ttlOf(client) ?? token.resourceServer?.accessTokenTTL ?? DEFAULT_TTL,
  },
  extraTokenClaims: async (ctx, token) => {
    const c = extras.get(token.clientId);
    if (!c) return undefined;
    const claims = { ...(c.claims ?? {}) };
    if (c.tenant) {
      claims.tenant = c.tenant;
      claims.org = { ...(claims.org ?? {}), tenant: c.tenant };
    }
    return claims;
  },
  formats: {
    customizers: {
      // sub of a client_credentials token is the client_id; a client may
      // name another subject.
      jwt: async (ctx, token, jwt) => {
        const subject = extras.get(token.clientId)?.subject;
        if (subject) jwt.payload.sub = subject;
      },
    },
  },
});
provider.registerGrantType(
  TOKEN_EXCHANGE,
  tokenExchange,
  ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'resource', 'audience', 'scope'],
  ['resource', 'audience'],
);
provider.on('server_error', (ctx, err) => console.error('idp: server_error', err));
provider.on('grant.error', (ctx, err) => console.error('idp: grant.error', err.message, err.error_description ?? ''));
provider.on('grant.success', (ctx) => {
  const grantType = ctx.oidc.params.grant_type;
  const clientId = ctx.oidc.client?.clientId;
  let table;
  let key;
  if (grantType === 'client_credentials') {
    table = counts.client_credentials;
    key = clientId;
  } else if (grantType === TOKEN_EXCHANGE) {
    table = counts.token_exchange;
    key = `${clientId} ${exchangeSubjects.get(ctx)}`;
  } else if (grantType === 'authorization_code' || grantType === 'refresh_token') {
    table = counts[grantType];
    key = clientId;
  } else {
    return;
  }
  table[key] = (table[key] ?? 0) + 1;
});

provider.on('grant.revoked', (ctx) => {
  const clientId = ctx.oidc.client?.clientId;
  counts.revocation[clientId] = (counts.revocation[clientId] ?? 0) + 1;
});

function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 16384) throw new Error('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// The sign-in and consent forms (see the header).
async function interaction(req, res, uid, action) {
  const html = (status, body) => {
    res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
    res.end(`<!doctype html><html><body>${body}</body></html>`);
  };
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return html(400, 'interaction mismatch');
  if (req.method === 'GET' && action === undefined) {
    if (details.prompt.name === 'login') {
      return html(200, `<h1>Sign in</h1><form method="post" action="/interaction/${escapeHTML(uid)}/login">`
        + '<input name="login"><button type="submit">Sign in</button></form>');
    }
    return html(200, `<h1>Grant ${escapeHTML(details.params.client_id)} access</h1>`
      + `<p>scope: ${escapeHTML(details.params.scope ?? '')}</p>`
      + `<form method="post" action="/interaction/${escapeHTML(uid)}/confirm"><button type="submit">Allow</button></form>`
      + `<form method="post" action="/interaction/${escapeHTML(uid)}/abort"><button type="submit">Deny</button></form>`);
  }
  if (req.method !== 'POST') return html(405, 'method not allowed');
  const form = await readForm(req);
  let result;
  if (action === 'login') {
    const login = form.get('login');
    if (!login) return html(400, 'login required');
    result = { login: { accountId: login } };
  } else if (action === 'confirm') {
    const { prompt: { details: missing }, params, session } = details;
    let grant;
    if (details.grantId) {
      grant = await provider.Grant.find(details.grantId);
    } else {
      grant = new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    }
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    if (missing.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    result = { consent: { grantId: await grant.save() } };
  } else if (action === 'abort') {
    result = { error: 'access_denied', error_description: 'the user denied access' };
  } else {
    return html(404, 'not found');
  }
  return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: action !== 'login' });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  const m = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|confirm|abort))?$/.exec(req.url.split('?')[0]);
  if (m) {
    interaction(req, res, m[1], m[2]).catch((err) => {
      console.error('idp: interaction', err);
      if (!res.headersSent) res.writeHead(400, { 'Content-Type': 'text/plain' });
      res.end(`interaction failed: ${err.message}`);
    });
    return;
  }
  if (req.url.split('?')[0] === '/test/counts') {
    if (req.method !== 'GET') {
      res.writeHead(405, { Allow: 'GET' }).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    // The tables of the code flow only once they count something.
    const out = { client_credentials: counts.client_credentials, token_exchange: counts.token_exchange };
    for (const k of ['authorization_code', 'refresh_token', 'revocation']) {
      if (Object.keys(counts[k]).length > 0) out[k] = counts[k];
    }
    res.end(JSON.stringify(out));
    return;
  }
  callback(req, res);
});

console.log(`idp listening on ${issuer}`);

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
