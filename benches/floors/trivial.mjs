// Cold-start floor: a Worker that answers at once. A fresh isolate of Self
// Capsule is compared with a fresh isolate of this (`npm run bench`).
export default {
  async fetch() {
    return Response.json({ ok: true });
  },
};
