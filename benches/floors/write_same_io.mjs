// Same-I/O write floor: the storage, KV and Cache API operations of one of
// Self Capsule's accepted writes of an agent with a full history window
// (the free tier's, so the write prunes), in the same order and with the
// same concurrency, and nothing else: no parsing, signature, schema, scan,
// chain or seal. Ours / this floor is what our own code costs; this floor /
// the plain write floor (write.mjs) is what the durable layout costs (three
// KV puts in two round trips, where the plain floor does one; two Cache API
// markers; the mirror ops and retry alarm stored with the state).
// Kept in step with src/worker/objects/agent.rs and handlers/write.rs.
import { DurableObject } from "cloudflare:workers";
import { putWrittenMarkers } from "./markers.mjs";

export class SameIoAgent extends DurableObject {
  async fetch(request) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    const body = await request.text();
    // One storage read: state, history index, pending mirror.
    const stored = await this.ctx.storage.get(["state", "history", "mirror"]);
    const n = JSON.parse(stored.get("state") ?? '{"n":0}').n + 1;
    const entry = `self:entry:${id}:${String(n).padStart(16, "0")}`;
    // One atomic commit: state, mirror ops, index, entry, the pruned entry's
    // deletion, the retry alarm.
    const mirror = JSON.stringify({ ops: [entry, "index", "record"], failures: 0 });
    this.ctx.storage.put({ state: JSON.stringify({ n }), mirror, history: body, [`h:${n}`]: body });
    if (n > 1) this.ctx.storage.delete(`h:${n - 1}`);
    await this.ctx.storage.setAlarm(Date.now() + 1000);
    // KV: the entry (with the delete of the entry the previous write
    // pruned), then index and record together.
    await Promise.all([this.env.SELF.put(entry, body), n > 2 ? this.env.SELF.delete(`self:entry:${id}:${n - 2}`) : null]);
    await Promise.all([this.env.SELF.put(`self:history:${id}`, body), this.env.SELF.put(`self:capsule:${id}`, body)]);
    // This write's pruned entry waits for the next write: the mirror keeps
    // it, and the alarm moves to the day-later cleanup.
    this.ctx.storage.put("mirror", JSON.stringify({ ops: [`self:entry:${id}:${n - 1}`], failures: 0 }));
    await this.ctx.storage.setAlarm(Date.now() + 86_400_000);
    return Response.json({ accepted: true, seq: n });
  }

  async alarm() {}
}

export default {
  async fetch(request, env) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    const answer = await env.SAME_IO_AGENT.get(env.SAME_IO_AGENT.idFromName(id)).fetch(request);
    // This location's copies of head.json and capsule.json: a marker each.
    await putWrittenMarkers(id);
    return answer;
  },
};
