// The official MCP TypeScript SDK client (@modelcontextprotocol/client, pinned in
// package.json) through the lab's cycle: connect, list, read, listen, wait for
// notifications/resources/updated, read again, close the listen.
//
// usage: node ts_client.mjs <mcp-url> <default|auto>
//   default: `new Client(info)` with default options (versionNegotiation defaults to
//            'legacy', i.e. a 2025-era initialize);
//   auto:    versionNegotiation {mode: 'auto'} (server/discover probe first).
// Prints one JSON line; exit 0 only if the re-read saw version 2.
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, mode = "default"] = process.argv.slice(2);
const REVIEW = "test://review/status";
const pkg = JSON.parse(
  readFileSync(new URL("./node_modules/@modelcontextprotocol/client/package.json", import.meta.url)),
);
const info = { name: `ts-sdk-client-${mode}`, version: pkg.version };
const options = mode === "auto" ? { versionNegotiation: { mode: "auto" } } : {};
const out = { sdk: pkg.name, version: pkg.version, mode, step: "connect" };
const text = (result) => result.contents[0].text;

try {
  const client = new Client(info, options);
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.step = "list";
  await client.listResources();
  out.step = "read";
  out.before = text(await client.readResource({ uri: REVIEW }));
  out.step = "listen";
  let updated;
  const gotUpdate = new Promise((resolve) => {
    updated = resolve;
  });
  client.setNotificationHandler("notifications/resources/updated", (n) => {
    if (n.params.uri === REVIEW) updated();
  });
  const sub = await client.listen({ resourceSubscriptions: [REVIEW] });
  out.honored = sub.honoredFilter;
  out.step = "wait";
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error("no update within 15 s")), 15000).unref(),
  );
  await Promise.race([gotUpdate, timeout]);
  out.step = "reread";
  out.after = text(await client.readResource({ uri: REVIEW }));
  out.step = "close";
  await sub.close();
  out.closed = await sub.closed;
  await client.close();
  out.step = "done";
} catch (err) {
  out.error = String(err && err.message ? err.message : err).slice(0, 300);
}
console.log(JSON.stringify(out));
process.exit(out.after && out.after.includes("version: 2") ? 0 : 1);
