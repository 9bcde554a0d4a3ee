// `selfcap mcp` under the official TypeScript MCP SDK's Client (stdio), for
// the end-to-end tests that drive it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

/**
 * Starts `bin args` (default `selfcap mcp`) and connects a real MCP client
 * (initialize included). `env` is added to the caller's environment minus
 * SELFCAP_* and DIFFDELTA_BASE_URL; loopback is never proxied.
 */
export async function mcpSession(bin, env, args = ["mcp"], { cwd } = {}) {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("SELFCAP_") && k !== "DIFFDELTA_BASE_URL"),
  );
  const transport = new StdioClientTransport({
    command: bin,
    args,
    env: { ...clean, NO_PROXY: "127.0.0.1,localhost", no_proxy: "127.0.0.1,localhost", ...env },
    stderr: "pipe",
    cwd,
  });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client({ name: "self-capsule-e2e", version: "1.0.0" });
  await client.connect(transport);
  return {
    client,
    stderr: () => stderr,
    /** tools/call; the one text content parsed as JSON. */
    async call(name, args = {}) {
      const r = await client.callTool({ name, arguments: args });
      assert.equal(r.content.length, 1, `${name}: one content block`);
      assert.equal(r.content[0].type, "text");
      return { isError: r.isError === true, body: JSON.parse(r.content[0].text), bytes: r.content[0].text.length };
    },
    close: () => client.close(),
  };
}

/**
 * The MCP server configs docs/MCP.md gives, as written: each
 * `<!-- mcp-config: NAME -->` JSON block, and the `claude mcp add` line (as
 * `claude-code-cli`). Returns `[{ name, server: { command, args, env, type? } }]`.
 */
export function mcpConfigs() {
  const doc = readFileSync(new URL("../../docs/MCP.md", import.meta.url), "utf8");
  const configs = [...doc.matchAll(/<!-- mcp-config: ([a-z-]+) -->\n```json\n([\s\S]*?)\n```/g)].map((m) => {
    const servers = Object.values(JSON.parse(m[2]).mcpServers);
    assert.equal(servers.length, 1, m[1]);
    return { name: m[1], server: servers[0] };
  });
  // Claude Code's command line: `claude mcp add NAME --env K=V -- COMMAND ARGS...`.
  const line = doc.match(/`claude mcp add (\S+) --env (\w+)=(\S+) -- ([^`]+)`/);
  assert.ok(line, "the claude mcp add line");
  const [command, ...args] = line[4].split(" ");
  configs.push({ name: "claude-code-cli", server: { command, args, env: { [line[2]]: line[3] } } });
  return configs;
}
