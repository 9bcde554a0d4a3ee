// A WebSocket opened on the Worker under test (Miniflare's dispatchFetch with
// `Upgrade: websocket`), shared by the watch and feed-push files: frames and
// the close are recorded as they come.
import assert from "node:assert/strict";
import { BASE } from "./harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Opens a socket on `path` (asserting the 101). `next()` resolves with the
 * next frame (parsed), `nextText()` with it as text, either null after `ms`
 * (default `waitMs`); `closed` with the close event's code and reason.
 */
export async function openSocket(w, path, { ip = "198.51.100.1", headers = {}, waitMs = 3000 } = {}) {
  const res = await w.mf.dispatchFetch(BASE + path, {
    headers: { Upgrade: "websocket", "cf-connecting-ip": ip, ...headers },
  });
  assert.equal(res.status, 101, `upgrade answered ${res.status}: ${res.status === 101 ? "" : await res.text()}`);
  const ws = res.webSocket;
  const frames = [];
  let wake = null;
  let onClose;
  const closed = new Promise((r) => (onClose = r));
  ws.addEventListener("message", (e) => {
    frames.push(typeof e.data === "string" ? e.data : `<binary ${e.data.byteLength}>`);
    wake?.();
  });
  ws.addEventListener("close", (e) => {
    onClose({ code: e.code, reason: e.reason });
    wake?.();
  });
  ws.accept();
  let read = 0;
  return {
    ws,
    frames,
    closed,
    /** The next frame as text, or null after `ms`. */
    async nextText(ms = waitMs) {
      const end = Date.now() + ms;
      while (frames.length <= read && Date.now() < end) {
        await Promise.race([new Promise((r) => (wake = r)), sleep(Math.max(1, end - Date.now()))]);
      }
      return frames.length > read ? frames[read++] : null;
    },
    /** The next frame, parsed as JSON. */
    async next(ms) {
      const t = await this.nextText(ms);
      return t === null ? null : JSON.parse(t);
    },
  };
}
