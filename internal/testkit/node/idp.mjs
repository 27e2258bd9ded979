// A real, certified OpenID provider (oidc-provider) on 127.0.0.1, for tests.
// Started by testkit.StartIDP; not for production use.
//
// Usage: node idp.mjs [--port N] --clients FILE
//   --port     port to listen on (default 0: any free port); env IDP_PORT.
//   --clients  JSON file with the static clients; env IDP_CLIENTS_FILE.
//
// The clients file is an array of
//   {"client_id", "client_secret", "tenant"?, "subject"?, "ttl"?, "alg"?, "claims"?}
// where tenant becomes the "tenant" and "org.tenant" claims (omitted if
// empty), subject replaces "sub" (default: the client_id), ttl is the access
// token lifetime in seconds (default 300), alg is the JWS algorithm of its
// access tokens ("RS256" default, or "ES256"), and claims are merged into the
// access token's claims.
//
// Clients use the client_credentials grant, authenticating with
// client_secret_basic or client_secret_post. A token request must name a
// resource (RFC 8707): the access token is then a JWT whose aud is that
// resource, with the requested scopes among "mcp mcp:read mcp:write mcp:admin".
//
// Prints "idp listening on http://127.0.0.1:PORT" once ready (the issuer).
// Exits 0 on SIGTERM or SIGINT.

import { generateKeyPairSync, randomBytes, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

// The scopes every resource server (the gateway) accepts.
export const RESOURCE_SCOPES = 'mcp mcp:read mcp:write mcp:admin';
const DEFAULT_TTL = 300;

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

// Open the socket first, so that port 0 works and the issuer carries the
// real port.
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(args.port), '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: clientList.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
  })),
  jwks,
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  scopes: ['openid', ...RESOURCE_SCOPES.split(' ')],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No default: a token request must name its resource.
      defaultResource: async () => undefined,
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
provider.on('server_error', (ctx, err) => console.error('idp: server_error', err));
provider.on('grant.error', (ctx, err) => console.error('idp: grant.error', err.message, err.error_description ?? ''));

server.on('request', provider.callback());

console.log(`idp listening on ${issuer}`);

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
