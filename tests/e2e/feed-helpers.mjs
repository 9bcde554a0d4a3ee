// What the projected-feed end-to-end files share: the ddv1 fixture's files
// and the spec's watch_cursor computed from them (independently of the Rust
// core), and a Pro agent paid through the real upgrade path.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { exampleCapsule, jcs, newAgent, publish } from "./helpers.mjs";
import { claim, claimBody, confirm, nextIp, pay, quoteOk } from "./upgrade-helpers.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The cron of wrangler.toml's trigger (what `scheduled()` is run with). */
export const CRON = "*/5 * * * *";

/** A fixture file of a state (`v1`, `v2`, `v3`), parsed. */
export const fixtureFile = (state, rel) =>
  JSON.parse(readFileSync(path.join(ROOT, "tests/fixtures/ddv1", state, rel), "utf8"));

/** The catalog's cursor per source in a state (the zero cursor is null). */
export function cursorsOf(state) {
  const zero = "sha256:" + "0".repeat(64);
  return Object.fromEntries(
    fixtureFile(state, "diff/sources.json").sources.map((s) => [s.source_id, s.cursor === zero ? null : s.cursor ?? null]),
  );
}

/** The spec's watch_cursor over `ids`, from a state's catalog. */
export function expectedCursor(state, ids) {
  const cur = cursorsOf(state);
  const text = jcs({ basis: "watch_v1", sources: [...ids].sort().map((id) => [id, cur[id] ?? null]) });
  return "sha256:" + crypto.createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * `agent` (a new one unless given) published (seq 1) with `watch` and `extra` capsule members,
 * credited Pro through quote, a transfer on `chain` and claim when `pro`.
 * The agent carries the client address it used (`ip`).
 */
export async function agentWith(w, chain, watch, { pro = true, extra = {}, agent = newAgent() } = {}) {
  const a = agent;
  const ip = nextIp();
  const capsule = exampleCapsule(a.agentId, { ...(watch ? { watch } : {}), ...extra });
  const r = await publish(w, a, 1, capsule, { ip });
  assert.equal(r.status, 200, r.text);
  if (pro) {
    const q = await quoteOk(w, a, "pro", { ip });
    const tx = await pay(chain, q);
    await confirm(chain);
    const c = await claim(w, claimBody(a, q.invoice_id, tx, 1), { ip });
    assert.equal(c.status, 200, c.text);
  }
  a.ip = ip;
  return a;
}
