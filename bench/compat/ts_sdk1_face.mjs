// The official TypeScript SDK 1.x client (@modelcontextprotocol/sdk, pinned in package.json:
// the SDK today's agent CLIs embed) against the agent face on stdio (`mcpsubctl mcp`):
// initialize (2025-11-25), tools/list, read, resources/list + read, resources/subscribe,
// a change made through the lab's control surface, notifications/resources/updated,
// wait_for_change with a progress token, and the list_changed after a subscribe tool call.
//
// usage: node ts_sdk1_face.mjs <mcpsubctl> <lab-base-url> <lab-mcp-url> <uri>
// (MCPSUB_STATE_DIR in the environment names the daemon). Prints one JSON line; exit 0 on
// success, 1 with {"step", "error"} otherwise.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mcpsubctl, labBase, labUrl, uri] = process.argv.slice(2);
const pkg = JSON.parse(
  readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url)),
);
const out = { sdk: pkg.name, version: pkg.version, step: "connect" };
const put = async (u, text) => {
  const r = await fetch(`${labBase}/lab/resources`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ uri: u, text }),
  });
  if (!r.ok) throw new Error(`lab PUT ${r.status}`);
};
const waitFor = (list, what) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${what} within 20 s`)), 20000);
    const check = () => (list.length ? (clearTimeout(timer), resolve(list[0])) : setTimeout(check, 20));
    check();
  });

try {
  const updated = [];
  const listChanged = [];
  const client = new Client({ name: "ts-sdk1-face", version: pkg.version });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri));
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => listChanged.push(1));
  const transport = new StdioClientTransport({
    command: mcpsubctl,
    args: ["mcp", "--no-autostart"],
    env: { ...process.env },
    stderr: "inherit",
  });
  await client.connect(transport);
  out.protocolVersion = transport._protocolVersion ?? null;
  out.server = client.getServerVersion();
  out.subscribeCapability = client.getServerCapabilities()?.resources?.subscribe ?? null;
  out.step = "tools/list";
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.step = "read";
  const read = await client.callTool({ name: "read", arguments: { uri } });
  out.before = read.structuredContent.text;
  const cursor = read.structuredContent.eventId;
  out.step = "resources";
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.resourceText = (await client.readResource({ uri })).contents[0].text;
  out.step = "subscribe";
  await client.subscribeResource({ uri });
  await put(uri, out.before + "changed by the TS test\n");
  out.step = "updated";
  out.updatedUri = await waitFor(updated, "notifications/resources/updated");
  out.step = "wait_for_change";
  const progress = [];
  const change = await client.callTool(
    { name: "wait_for_change", arguments: { uri, after: cursor, timeoutSeconds: 20 } },
    undefined,
    { onprogress: (p) => progress.push(p.progress) },
  );
  out.changed = change.structuredContent.changed;
  out.after = change.structuredContent.finalText;
  out.diff = change.structuredContent.diff;
  out.step = "progress";
  const quiet = await client.callTool(
    { name: "wait_for_change", arguments: { after: change.structuredContent.cursor, timeoutSeconds: 1 } },
    undefined,
    { onprogress: (p) => progress.push(p.progress) },
  );
  out.quietChanged = quiet.structuredContent.changed;
  out.progress = progress;
  out.step = "list_changed";
  const other = uri + "-other";
  await put(other, "other\n");
  const added = await client.callTool({ name: "subscribe", arguments: { url: labUrl, uri: other } });
  out.subscribeError = added.isError ?? false;
  await waitFor(listChanged, "notifications/resources/list_changed");
  out.listChanged = listChanged.length;
  out.step = "close";
  await client.close();
  out.step = "done";
  console.log(JSON.stringify(out));
  process.exit(0);
} catch (err) {
  out.error = String(err?.stack ?? err);
  console.log(JSON.stringify(out));
  process.exit(1);
}
