// A TCP forwarder: node forward.mjs LISTEN_HOST:PORT TARGET_HOST:PORT
//
// The compose stack's OpenID provider (internal/testkit/node/idp.mjs) names
// itself http://127.0.0.1:4444, and the gateway only accepts plain-http
// issuers on a loopback address. So every party sees the provider at
// 127.0.0.1:4444 in its own network namespace: the IdP container forwards
// 0.0.0.0:4445 to it, and each gateway's namespace holds a forwarder from
// 127.0.0.1:4444 to idp:4445. See docs/deploy.md, "The issuer URL".

import { connect, createServer } from 'node:net';

function hostPort(s) {
  const i = s.lastIndexOf(':');
  const port = Number(s.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
    console.error(`forward: ${JSON.stringify(s)} is not HOST:PORT`);
    process.exit(2);
  }
  return { host: s.slice(0, i) || '0.0.0.0', port };
}

export function forward(listen, target) {
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
  });
  server.on('error', (err) => {
    console.error('forward:', err.message);
    process.exit(1);
  });
  server.listen(listen.port, listen.host, () => {
    console.log(`forwarding ${listen.host}:${listen.port} to ${target.host}:${target.port}`);
  });
  return server;
}

// Run as a program (not imported by start.mjs).
if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.length !== 4) {
    console.error('usage: node forward.mjs LISTEN_HOST:PORT TARGET_HOST:PORT');
    process.exit(2);
  }
  forward(hostPort(process.argv[2]), hostPort(process.argv[3]));
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
}
