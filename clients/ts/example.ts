// The bot flow from TypeScript, against a running service:
//
//   node dist/example.js http://127.0.0.1:8787
//
// new key -> head (404) -> put seq 1 -> head (ETag) -> head again (304).
// Prints a JSON summary; exits non-zero if any step surprises it.
import { generateKeyPairSync } from "node:crypto";
import { SelfCapsule, cursor, type Json } from "./selfcap.js";

async function main(baseUrl: string): Promise<number> {
  const { privateKey } = generateKeyPairSync("ed25519"); // persist it privately (mode 0600)
  const svc = new SelfCapsule(baseUrl, privateKey);
  const capsule: Json = {
    schema_version: "self_capsule_v0",
    agent_id: svc.agentId,
    policy: {
      policy_version: "v0",
      rehydrate_mode: "strict",
      deny_external_instructions: true,
      deny_tool_instructions_in_text: true,
      memory_budget: { max_rehydrate_tokens: 900, max_objectives: 8 },
    },
    objectives: [{ id: "ts-demo", status: "in_progress", title: "Publish from TypeScript" }],
  };

  const fresh = await svc.head();
  if (fresh.status !== 404) throw new Error(`fresh agent: expected 404, got ${fresh.status}`);

  const seq = 1; // = last accepted seq (head.json "seq") + 1
  const put = await svc.put(capsule, seq);
  if (put.status !== 200) {
    console.error(JSON.stringify(put.body)); // put.body.reason_codes says why
    return 1;
  }
  if (put.body.cursor !== cursor(capsule)) throw new Error("the service hashed something else");

  const head = await svc.head();
  if (head.status !== 200 || head.body.seq !== seq || head.body.cursor !== cursor(capsule)) {
    throw new Error(`unexpected head: ${JSON.stringify(head)}`);
  }
  const poll = await svc.head(head.etag ?? undefined); // nothing changed
  if (poll.status !== 304) throw new Error(`expected 304, got ${poll.status}`);

  console.log(JSON.stringify({ agent_id: svc.agentId, seq, cursor: head.body.cursor, poll: poll.status }));
  return 0;
}

process.exitCode = await main(process.argv[2]);
