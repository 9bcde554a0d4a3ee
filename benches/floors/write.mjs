// Write floor: the least a Worker can do for an accepted PUT that survives —
// one Durable Object per agent, which does one storage put and one KV put and
// answers. No parsing beyond the agent id, no signature, schema, scan, chain
// or seal: Self Capsule's writes do strictly more, and are measured against
// this in the same run (`npm run bench`).
import { DurableObject } from "cloudflare:workers";

export class FloorAgent extends DurableObject {
  async fetch(request) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    const body = await request.text();
    await this.ctx.storage.put("capsule", body);
    await this.env.SELF.put(`self:capsule:${id}`, body);
    return Response.json({ accepted: true });
  }
}

export default {
  async fetch(request, env) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    return env.FLOOR_AGENT.get(env.FLOOR_AGENT.idFromName(id)).fetch(request);
  },
};
