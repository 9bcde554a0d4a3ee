// Required-I/O write floor: the least I/O any implementation of the
// service's own durability and read-after-write rules must do for an accepted PUT, and nothing else. One
// Durable Object per agent commits the new state and history entry in one
// storage put (its seq is kept in memory, so no storage read); one KV put of
// the record, where reads come from; then, in the Worker, the two Cache API
// markers that let the location that took the write see it at once. No retry alarm, no mirror bookkeeping, no index: generous on
// purpose. This floor / the plain write floor (write.mjs) bounds what any
// write meeting those requirements can reach here; `npm run bench` prints it.
import { DurableObject } from "cloudflare:workers";
import { putWrittenMarkers } from "./markers.mjs";

export class RequiredAgent extends DurableObject {
  async fetch(request) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    const body = await request.text();
    this.seq = (this.seq ?? 0) + 1;
    await this.ctx.storage.put({ state: String(this.seq), [`h:${this.seq}`]: body });
    await this.env.SELF.put(`self:capsule:${id}`, body);
    return Response.json({ accepted: true, seq: this.seq });
  }
}

export default {
  async fetch(request, env) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    const answer = await env.REQUIRED_AGENT.get(env.REQUIRED_AGENT.idFromName(id)).fetch(request);
    await putWrittenMarkers(id);
    return answer;
  },
};
