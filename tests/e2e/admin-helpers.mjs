// The operator API from the tests: a token the test Workers are started
// with, and the deployment's totals read until they say what a test expects
// (each agent's object sends its counts from its alarm, within a second
// under the test clock).
import assert from "node:assert/strict";

/** The operator token the test Workers are started with. */
export const ADMIN_TOKEN = "op-" + "7f3a9c".repeat(8);
/** The secrets that turn the operator API on with it. */
export const ADMIN_SECRETS = { SELFCAP_ADMIN_TOKEN: ADMIN_TOKEN };

/** GET /api/v1/admin/stats with the token. */
export async function stats(w, headers = {}) {
  const r = await w.fetch("/api/v1/admin/stats", { headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...headers } });
  assert.equal(r.status, 200, r.text);
  return r.json;
}

/**
 * The totals once `ok(totals)` holds (or the last ones read after
 * `timeoutMs`, for the assertion to show).
 */
export async function statsUntil(w, ok, timeoutMs = 15_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const s = await stats(w);
    if (ok(s) || Date.now() > end) return s;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * The totals once they stop moving (two reads 1.5 s apart agree): what
 * earlier requests counted has arrived, so a test can measure its own.
 */
export async function statsSettled(w, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  let last = await stats(w);
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_500));
    const now = await stats(w);
    const same = JSON.stringify({ ...now, as_of: null }) === JSON.stringify({ ...last, as_of: null });
    if (same || Date.now() > end) return now;
    last = now;
  }
}

