// The two Cache API markers an accepted write leaves in the location that
// took it (so a client that wrote reads its new cursor there at once): a marker each for the agent's head.json and
// capsule.json, so that location reads KV again at once. Shared by the
// floors that must do what our writes do here.
export function putWrittenMarkers(id) {
  return Promise.all(
    ["head.json", "capsule.json"].map((doc) =>
      caches.default.put(
        `https://read-cache.floor.internal/self/${id}/${doc}`,
        new Response(null, { headers: { "cache-control": "public, max-age=60", "x-written-seq": "1" } }),
      ),
    ),
  );
}
