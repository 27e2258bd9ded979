// An end-to-end MCP client built on the official TypeScript SDK, for tests.
// Run by testkit.RunTSClient.
//
// Usage: MCP_TOKEN=... node mcp-client.mjs URL STEPS_JSON
//
// Connects to the Streamable HTTP endpoint URL, sending
// "Authorization: Bearer $MCP_TOKEN" on every request (no header if MCP_TOKEN
// is empty), then runs STEPS_JSON, an array of steps:
//   {"op": "listTools" | "listResources" | "listResourceTemplates" |
//          "listPrompts" | "ping" | "serverInfo"}
//   {"op": "callTool", "name": N, "arguments": {...}, "progress": bool}
//   {"op": "readResource", "uri": U}
//   {"op": "getPrompt", "name": N, "arguments": {...}}
// and prints one JSON line per step, in order:
//   {"op", "ok": true, "result": ..., "progress"?: [...]}
//   {"op", "ok": false, "error": {"code", "message", "data"?, "httpStatus"?,
//                                 "wwwAuthenticate"?}}
// where code is the JSON-RPC error code, or for an HTTP error the status
// (then also in httpStatus). Exits 0 after the steps, whatever their outcome.
// If connecting (initialize) fails, prints one line for op "connect" and
// exits 1.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const [url, stepsJSON = '[]'] = process.argv.slice(2);
if (!url) {
  console.error('usage: MCP_TOKEN=... node mcp-client.mjs URL STEPS_JSON');
  process.exit(2);
}
const steps = JSON.parse(stepsJSON);
const token = process.env.MCP_TOKEN ?? '';

// The last HTTP error response, to report its status and challenge.
let lastHTTPError;
async function recordingFetch(input, init) {
  const res = await fetch(input, init);
  if (!res.ok) {
    lastHTTPError = {
      status: res.status,
      wwwAuthenticate: res.headers.get('www-authenticate') ?? undefined,
    };
  }
  return res;
}

function errorJSON(err) {
  const out = { code: 0, message: String(err?.message ?? err) };
  if (err instanceof McpError) {
    out.code = err.code;
    // McpError prefixes "MCP error <code>: " to the server's message.
    const prefix = `MCP error ${err.code}: `;
    if (out.message.startsWith(prefix)) out.message = out.message.slice(prefix.length);
    if (err.data !== undefined) out.data = err.data;
  } else if (err instanceof StreamableHTTPError || err?.name === 'UnauthorizedError') {
    out.code = err.code ?? 0;
    if (lastHTTPError) {
      out.httpStatus = lastHTTPError.status;
      out.wwwAuthenticate = lastHTTPError.wwwAuthenticate;
    } else if (err.code > 0) {
      out.httpStatus = err.code;
    }
  } else if (typeof err?.code === 'number') {
    out.code = err.code;
  }
  return out;
}

function print(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers },
  fetch: recordingFetch,
});
const client = new Client({ name: 'testkit-ts-client', version: '0.0.1' });
// Errors of the background GET stream are not a step's outcome.
client.onerror = (err) => console.error('mcp-client: transport error:', err?.message ?? err);

try {
  lastHTTPError = undefined;
  await client.connect(transport);
} catch (err) {
  print({ op: 'connect', ok: false, error: errorJSON(err) });
  await transport.close().catch(() => {});
  process.exit(1);
}

async function run(step) {
  switch (step.op) {
    case 'listTools':
      return { result: await client.listTools() };
    case 'callTool': {
      const progress = [];
      const options = step.progress ? { onprogress: (p) => progress.push(p) } : undefined;
      const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, options);
      return step.progress ? { result, progress } : { result };
    }
    case 'listResources':
      return { result: await client.listResources() };
    case 'listResourceTemplates':
      return { result: await client.listResourceTemplates() };
    case 'readResource':
      return { result: await client.readResource({ uri: step.uri }) };
    case 'listPrompts':
      return { result: await client.listPrompts() };
    case 'getPrompt':
      return { result: await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }) };
    case 'ping':
      return { result: await client.ping() };
    case 'serverInfo':
      return {
        result: {
          serverInfo: client.getServerVersion(),
          capabilities: client.getServerCapabilities(),
          instructions: client.getInstructions(),
          protocolVersion: transport.protocolVersion,
          sessionId: transport.sessionId,
        },
      };
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

for (const step of steps) {
  lastHTTPError = undefined;
  try {
    print({ op: step.op, ok: true, ...(await run(step)) });
  } catch (err) {
    print({ op: step.op, ok: false, error: errorJSON(err) });
  }
}

// End the session (DELETE), as a well-behaved client does; a server may
// refuse (405), which is fine.
await transport.terminateSession().catch(() => {});
await client.close().catch(() => {});
process.exit(0);
