// The bot flow from TypeScript, against a running service:
//
//   node dist/example.js http://127.0.0.1:8787
//   node dist/example.js http://127.0.0.1:8787 private
//
// new key -> head (404) -> put seq 1 -> head (ETag) -> head again (304). With
// `private`: a private capsule (access_control.public false, one granted
// reader) -> anonymous GET (404) -> the owner's signed GET -> the reader's
// signed GET. Prints a JSON summary; exits non-zero if any step surprises it.
import { generateKeyPairSync } from "node:crypto";
import { SelfCapsule, cursor, type Json } from "./selfcap.js";

const exampleCapsule = (agent: string): { [key: string]: Json } => ({
  schema_version: "self_capsule_v0",
  agent_id: agent,
  policy: {
    policy_version: "v0",
    rehydrate_mode: "strict",
    deny_external_instructions: true,
    deny_tool_instructions_in_text: true,
    memory_budget: { max_rehydrate_tokens: 900, max_objectives: 8 },
  },
  objectives: [{ id: "ts-demo", status: "in_progress", title: "Publish from TypeScript" }],
});

async function main(baseUrl: string): Promise<number> {
  const { privateKey } = generateKeyPairSync("ed25519"); // persist it privately (mode 0600)
  const svc = new SelfCapsule(baseUrl, privateKey);
  const capsule: Json = exampleCapsule(svc.agentId);

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

/** A private capsule: only its owner and the readers it grants can read it, with a
 * signed read (docs/PROTOCOL.md §12); anyone else gets 404, as if it did not exist. */
async function privateCapsule(baseUrl: string): Promise<number> {
  const owner = new SelfCapsule(baseUrl, generateKeyPairSync("ed25519").privateKey);
  const reader = new SelfCapsule(baseUrl, generateKeyPairSync("ed25519").privateKey);
  const capsule = exampleCapsule(owner.agentId);
  capsule.access_control = {
    public: false,
    authorized_readers: [{ agent_id: reader.agentId, scopes: ["READ_CAPSULE"] }],
  };
  const put = await owner.put(capsule, 1);
  if (put.status !== 200) {
    console.error(JSON.stringify(put.body));
    return 1;
  }

  const anonymous = await owner.get(); // unsigned: 404, like an agent that never published
  if (anonymous.status !== 404) throw new Error(`anonymous read of a private capsule: expected 404, got ${anonymous.status}`);
  const mine = await owner.get({ signed: true });
  if (mine.status !== 200 || cursor(mine.body) !== cursor(capsule)) throw new Error(`owner's signed read: ${mine.status}`);
  const theirs = await reader.get({ agent: owner.agentId, signed: true }); // granted READ_CAPSULE
  if (theirs.status !== 200 || cursor(theirs.body) !== cursor(capsule)) throw new Error(`reader's signed read: ${theirs.status}`);
  const head = await reader.head(undefined, { agent: owner.agentId, signed: true }); // not granted READ_HEAD
  if (head.status !== 404) throw new Error(`reader's head.json without READ_HEAD: expected 404, got ${head.status}`);

  console.log(JSON.stringify({
    agent_id: owner.agentId, cursor: cursor(mine.body), anonymous: anonymous.status,
    owner: mine.status, reader: theirs.status, reader_head: head.status,
  }));
  return 0;
}

process.exitCode = process.argv[3] === "private" ? await privateCapsule(process.argv[2]) : await main(process.argv[2]);
