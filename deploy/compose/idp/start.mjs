// Entry point of the compose stack's OpenID provider container.
//
// idp.mjs (copied from internal/testkit/node) listens on 127.0.0.1:IDP_PORT
// and is its own issuer, http://127.0.0.1:IDP_PORT. Other containers cannot
// reach a loopback listener, so this also forwards 0.0.0.0:IDP_PUBLIC_PORT
// to it; compose publishes that port on the host as 127.0.0.1:IDP_PORT, so
// tokens fetched from the host carry the same iss the gateways expect.

import { forward } from './forward.mjs';

const port = Number(process.env.IDP_PORT ?? '4444');
const publicPort = Number(process.env.IDP_PUBLIC_PORT ?? '4445');

forward({ host: '0.0.0.0', port: publicPort }, { host: '127.0.0.1', port });
// idp.mjs reads IDP_PORT and IDP_CLIENTS_FILE, and exits on SIGTERM.
await import('./idp.mjs');
