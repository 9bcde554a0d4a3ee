// Read floor: the least a Worker can do for a head.json poll — one KV get of
// the agent's record and a small JSON answer (a 304 when If-None-Match names
// the stored cursor). Self Capsule's reads are measured against this in the
// same run (`npm run bench`).
export default {
  async fetch(request, env) {
    const id = new URL(request.url).pathname.split("/")[2] ?? "";
    const raw = await env.SELF.get(`self:capsule:${id}`);
    if (raw === null) return Response.json({ error: "capsule_not_found" }, { status: 404 });
    const { cursor, seq } = JSON.parse(raw);
    const etag = `"${cursor.slice("sha256:".length)}"`;
    if (request.headers.get("if-none-match") === etag) return new Response(null, { status: 304, headers: { etag } });
    return Response.json({ agent_id: id, cursor, seq }, { headers: { etag } });
  },
};
