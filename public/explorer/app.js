// The Capsule Explorer: fetches an agent's public documents from this origin
// (or reads an export.json from disk), hands them to the Rust core compiled
// to wasm (core.js: explore, diff, recovery_prompt, meta_summary) and shows what it finds.
// Every decision (what verifies, which entry failed, what changed) is the
// core's; this file only fetches and draws. Capsule text is untrusted: it is
// only ever set as textContent, never parsed as HTML or followed as a link.
import init, { explore, diff, recovery_prompt, meta_summary } from "./core.js";

const $ = (id) => document.getElementById(id);
const core = init();

const LEVELS = [
  ["structure", "Structure", ["schema", "safety"]],
  ["integrity", "Integrity", ["chain"]],
  ["auth", "Authenticity", ["signature", "seal"]],
];
const CHECK_TEXT = {
  schema: "entries, head and capsules are well-formed",
  safety: "capsules pass the safety scanner",
  chain: "hashes, links and the head agree",
  signature: "the agent's signatures verify",
  seal: "the service's seals verify",
};

/** An element with text and attributes; children may be strings or nodes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function status(text, kind = "") {
  const s = $("status");
  s.textContent = text;
  s.className = `status ${kind}`;
}

const short = (h) => (typeof h === "string" && h.length > 20 ? `${h.slice(0, 15)}…${h.slice(-6)}` : h);
const json = (v) => JSON.stringify(v);

// --- loading ---------------------------------------------------------------

async function getText(path) {
  const res = await fetch(path, { headers: { accept: "application/json" }, cache: "no-cache" });
  const text = await res.text();
  return { status: res.status, text };
}

function errorCode(text) {
  try {
    return JSON.parse(text).error;
  } catch {
    return undefined;
  }
}

async function openAgent(raw) {
  const id = raw.trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(id)) {
    status("An agent id is 64 hexadecimal characters (0-9, a-f).", "bad");
    return;
  }
  $("agent").value = id;
  status("Loading the agent's head, export and the service keyring…");
  const base = `/self/${id}`;
  let head, keys, bundle, meta;
  try {
    [head, keys, bundle, meta] = await Promise.all([
      getText(`${base}/head.json`),
      getText("/api/v1/self/keys"),
      getText(`${base}/export.json`),
      // Optional: a service without meta.json (or a failed read) leaves its section out.
      getText(`${base}/meta.json`).catch(() => undefined),
    ]);
  } catch (e) {
    status(`Could not reach this site: ${e.message}`, "bad");
    return;
  }
  if (head.status === 404 || bundle.status === 404) {
    status("No public capsule for this agent: it never published, or its capsule is private.", "bad");
    $("result").hidden = true;
    return;
  }
  for (const [what, r] of [["head.json", head], ["export.json", bundle], ["the keyring", keys]]) {
    if (r.status !== 200) {
      status(`Could not load ${what}: HTTP ${r.status} ${errorCode(r.text) ?? ""}`.trim(), "bad");
      $("result").hidden = true;
      return;
    }
  }
  await core;
  let timeline;
  try {
    timeline = JSON.parse(explore(bundle.text, keys.text, id, Date.now()));
  } catch (e) {
    status(e.message, "bad");
    return;
  }
  show(timeline, {
    online: true,
    agentId: id,
    head: JSON.parse(head.text),
    exportUrl: `${base}/export.json`,
  });
  drawMeta(meta);
}

let lastFile; // the export last opened from disk, re-checked when a keyring is chosen

async function openFile(file) {
  if (!file) return;
  lastFile = file;
  status(`Verifying ${file.name} offline…`);
  const keysFile = $("keys-file").files[0];
  let text, keys;
  try {
    text = await file.text();
    keys = keysFile ? await keysFile.text() : undefined;
  } catch (e) {
    status(`Could not read ${file.name}: ${e.message}`, "bad");
    return;
  }
  await core;
  let timeline;
  try {
    timeline = JSON.parse(explore(text, keys, undefined, Date.now()));
  } catch (e) {
    status(`${file.name}: ${e.message}`, "bad");
    $("result").hidden = true;
    return;
  }
  show(timeline, { online: false, fileName: file.name, keysName: keysFile?.name });
  drawMeta(undefined);
}

// --- drawing ---------------------------------------------------------------

function show(t, ctx) {
  const r = t.report;
  const entries = t.entries;
  const readable = entries.filter((e) => e.entry);
  const newest = readable.at(-1)?.entry;

  drawVerification(t, ctx);
  drawHead(t, ctx, newest);
  drawKeyLog(t);
  drawCapsule(newest);
  drawDiffChoices(readable);
  drawTimeline(entries);

  $("result").hidden = false;
  const n = entries.length;
  const held = entries.filter((e) => e.withheld).length;
  const disputed = entries.filter((e) => e.disputed).length;
  const heldNote =
    (held ? ` ${held} withheld (written private).` : "") +
    (disputed ? ` ${disputed} disputed (written with a key the owner rotated out).` : "");
  status(
    r.valid
      ? `Verified: ${n} ${n === 1 ? "entry" : "entries"}, every check passes.${heldNote}`
      : `Not verified: ${r.checks ? failingChecks(r).join(", ") : "see below"} failed.`,
    r.valid ? "ok" : "bad",
  );
  const title = ctx.online ? short(ctx.agentId) : ctx.fileName;
  document.title = `${r.valid ? "Verified" : "Not verified"}: ${title} · Capsule Explorer`;
}

const failingChecks = (r) => LEVELS.flatMap(([, , checks]) => checks).filter((c) => !r.checks[c].ok);

function where(sequence) {
  return sequence === null || sequence === undefined ? "head or bundle" : `entry ${sequence}`;
}

function drawVerification(t, ctx) {
  const r = t.report;
  const verdict = $("verdict");
  const levelName = LEVELS.find(([l]) => l === r.level)?.[1] ?? "below structure: not even well-formed";
  verdict.className = `verdict ${r.valid ? "ok" : "bad"}`;
  verdict.replaceChildren(
    el("span", { class: "badge" }, r.valid ? "✓ Verified" : "✗ Not verified"),
    ` Level: ${r.level} (${levelName}). `,
    r.valid
      ? `All checks pass over ${r.window.entries} ${r.window.entries === 1 ? "entry" : "entries"}.`
      : `Failing: ${failingChecks(r).join(", ")}.`,
  );
  $("source").textContent = ctx.online
    ? "Seals were checked against the service's published keyring (GET /api/v1/self/keys), not the keys the export carries."
    : ctx.keysName
      ? `Checked offline from ${ctx.fileName}, against the keyring in ${ctx.keysName}.`
      : `Checked offline from ${ctx.fileName}, with the keys the file itself carries (compare them with the service's published keyring, or choose a trusted keyring above).`;

  const body = $("checks").tBodies[0];
  body.replaceChildren();
  for (const [level, name, checks] of LEVELS) {
    checks.forEach((c, i) => {
      const m = r.checks[c];
      const row = el("tr", { class: m.ok ? "ok" : "bad" });
      if (i === 0) row.append(el("th", { scope: "row", rowspan: checks.length }, name));
      row.append(
        el("td", {}, el("code", {}, c), el("br"), el("span", { class: "hint" }, CHECK_TEXT[c])),
        el(
          "td",
          {},
          el("span", { class: "badge" }, m.ok ? "✓ pass" : "✗ fail"),
          ` ${m.checked} checked${m.ok ? "" : `, ${m.failures.length} failure${m.failures.length === 1 ? "" : "s"}`}`,
        ),
      );
      row.dataset.level = level;
      body.append(row);
    });
  }

  const failures = failingChecks(r).flatMap((c) => r.checks[c].failures.map((f) => ({ check: c, ...f })));
  const problems = $("problems");
  problems.replaceChildren();
  if (failures.length) {
    problems.append(
      el("h3", {}, "What failed, and where"),
      el(
        "ul",
        { class: "failures" },
        failures.map((f) => {
          const target = entryAnchor(t.entries, f);
          return el(
            "li",
            {},
            el("code", {}, f.check),
            " at ",
            target ? el("a", { href: `#${target}` }, where(f.sequence)) : where(f.sequence),
            `: ${f.detail}`,
          );
        }),
      ),
    );
  }
  const warnings = $("warnings");
  warnings.replaceChildren();
  if (r.warnings.length) {
    warnings.append(el("h3", {}, "Worth knowing"), el("ul", {}, r.warnings.map((w) => el("li", {}, w))));
  }
}

/** The timeline item a failure belongs to, as the core attributed it. */
function entryAnchor(entries, f) {
  const hit = entries.find((e) => e.failures.some((x) => x.check === f.check && x.detail === f.detail));
  return hit ? `entry-${hit.position}` : undefined;
}

function fact(dl, term, value, code = false) {
  if (value === undefined || value === null || value === "") return;
  dl.append(el("dt", {}, term), el("dd", {}, code ? el("code", {}, value) : String(value)));
}

function drawHead(t, ctx, newest) {
  const dl = $("head");
  dl.replaceChildren();
  const h = ctx.head;
  const chain = t.head;
  fact(dl, "Agent", t.report.agent_id || chain?.agent_id, true);
  if (h) {
    fact(dl, "Cursor", h.cursor, true);
    fact(dl, "Seq", h.seq);
    fact(dl, "Tier", h.paid_until ? `${h.tier} (paid until ${h.paid_until})` : h.tier);
    fact(dl, "Last write accepted", newest?.accepted_at);
    fact(dl, "Head generated", h.generated_at);
    if (h.writes) fact(dl, "Writes in the last 24 h", `${h.writes.used_24h} of ${h.writes.limit_24h}`);
  } else {
    fact(dl, "Cursor", chain?.cursor ?? newest?.cursor, true);
    fact(dl, "Seq", chain?.seq ?? newest?.seq);
    fact(dl, "Tier", "not in an export (open the agent online to see it)");
    fact(dl, "Last write accepted", newest?.accepted_at);
  }
  if (chain) {
    fact(dl, "Chain length", `${chain.length} ${chain.length === 1 ? "entry" : "entries"} ever appended`);
    fact(dl, "Retained", `from entry ${chain.first_sequence} (${chain.first_sequence} pruned)`);
  }
  const link = $("export-link");
  link.replaceChildren();
  if (ctx.online) {
    link.append(
      el("a", { href: ctx.exportUrl, download: `export-${ctx.agentId.slice(0, 12)}.json` }, "Download export.json"),
      " to verify it again offline (here or with selfcap verify --export).",
    );
    if (h && newest && h.cursor !== newest.cursor) {
      link.append(
        el("br"),
        `The head names cursor ${short(h.cursor)}, the export ends at ${short(newest.cursor)}: a write landed between the two reads; reload to see it.`,
      );
    }
  }
}

/**
 * The writes and refusals of meta.json (read by the core: its shape checked,
 * reason codes ranked with their bot actions). Absent (a 404, an older
 * service, a file opened offline) or unreadable: the section stays hidden.
 */
function drawMeta(res) {
  const section = $("meta-section");
  section.hidden = true;
  if (!res || res.status !== 200) return;
  let m;
  try {
    m = JSON.parse(meta_summary(res.text));
  } catch {
    return;
  }
  const dl = $("meta");
  dl.replaceChildren();
  const w = m.writes;
  const r = m.refusals;
  fact(dl, "Writes accepted", `${w.total} in total, ${w.in_window.used} of ${w.in_window.limit} in the last 24 h`);
  fact(dl, "First and last write", w.first_at || w.last_at ? `${w.first_at ?? "before meta.json"} → ${w.last_at ?? "-"}` : null);
  fact(dl, "Writes refused", `${r.total} in total, ${r.last_24h} in the last 24 h`);
  if (r.last) fact(dl, "Last refusal", `${r.last.at}: ${r.last.reason_codes.join(", ")}`);
  fact(dl, "Figures as of", m.as_of);
  const table = $("refusal-codes");
  const body = table.tBodies[0];
  body.replaceChildren(
    ...r.by_reason_code.map((c) =>
      el("tr", {}, el("td", {}, el("code", {}, c.code)), el("td", {}, String(c.count)), el("td", {}, c.action ?? "")),
    ),
  );
  table.hidden = r.by_reason_code.length === 0;
  section.hidden = false;
}

/** A capsule section: its heading and a list of `items` (or "None."). */
function section(title, items) {
  return el(
    "section",
    { class: "part" },
    el("h3", {}, title),
    items.length ? el("ul", {}, items) : el("p", { class: "hint" }, "None."),
  );
}

function tags(list) {
  return list?.length ? el("span", { class: "tags" }, list.map((t) => el("span", { class: "tag" }, t))) : null;
}

function drawCapsule(capsule) {
  const root = $("capsule");
  root.replaceChildren();
  const c = capsule?.capsule;
  if (!c) {
    root.append(el("p", { class: "hint" }, "The newest entry cannot be read, so there is no capsule to show."));
    $("prompt").textContent = "";
    return;
  }
  const objectives = (c.objectives ?? []).map((o) =>
    el(
      "li",
      { class: `objective status-${o.status}` },
      el("span", { class: "badge" }, o.status.replace("_", " ")),
      " ",
      el("strong", {}, o.title),
      o.priority ? ` (priority ${o.priority})` : "",
      el("br"),
      el("code", {}, o.id),
      o.checkpoint ? ` · checkpoint: ${o.checkpoint}` : "",
      o.updated_at ? ` · updated ${o.updated_at}` : "",
      " ",
      tags(o.tags),
    ),
  );
  const constraints = (c.constraints ?? []).map((k) =>
    el(
      "li",
      {},
      el("code", {}, k.type),
      ": ",
      Array.isArray(k.value) ? k.value.join(", ") : String(k.value),
      " ",
      el("span", { class: "hint" }, `(${k.id})`),
    ),
  );
  const caps = c.capabilities ?? {};
  const capabilities = [];
  if (caps.tool_allowlist?.length) capabilities.push(el("li", {}, "Tools: ", caps.tool_allowlist.join(", ")));
  if (caps.feature_flags?.length) capabilities.push(el("li", {}, "Feature flags: ", caps.feature_flags.join(", ")));
  const receipts = (c.pointers?.receipts ?? []).map((r) =>
    el(
      "li",
      {},
      el("strong", {}, r.name),
      " ",
      el("code", {}, r.content_hash),
      r.rationale ? el("br") : null,
      r.rationale ?? "",
      // An untrusted pointer: shown, never made a link or fetched.
      r.evidence_url ? el("br") : null,
      r.evidence_url ? el("span", { class: "hint" }, "evidence (not followed): ", el("code", {}, r.evidence_url)) : null,
      r.updated_at ? el("span", { class: "hint" }, ` · updated ${r.updated_at}`) : null,
      " ",
      tags(r.tags),
    ),
  );
  const notes = (c.pointers?.notes ?? []).map((n) =>
    el("li", {}, el("code", {}, n.key), ": ", n.value, n.updated_at ? el("span", { class: "hint" }, ` · updated ${n.updated_at}`) : null, " ", tags(n.tags)),
  );
  const p = c.policy ?? {};
  const other = [];
  if (c.self_motto) other.push(el("li", {}, "Motto: ", el("q", {}, c.self_motto)));
  other.push(
    el(
      "li",
      {},
      `Policy ${p.policy_version}: rehydrate ${p.rehydrate_mode}, up to ${p.memory_budget?.max_rehydrate_tokens} tokens, ${p.memory_budget?.max_objectives} objectives`,
    ),
  );
  const ac = c.access_control;
  other.push(el("li", {}, ac && ac.public === false ? `Private, ${ac.authorized_readers?.length ?? 0} reader grant(s)` : "Public"));
  if (c.watch) other.push(el("li", {}, "Watching: ", json(c.watch)));

  root.append(
    section("Objectives", objectives),
    section("Constraints", constraints),
    section("Capabilities", capabilities),
    section("Receipts", receipts),
    section("Notes", notes),
    section("Policy and more", other),
  );
  try {
    $("prompt").textContent = recovery_prompt(json(c));
  } catch (e) {
    $("prompt").textContent = e.message;
  }
}

// The agent's key log (docs/PROTOCOL.md §14): which key spoke for it, from
// when. Shown only when the export carries one.
function drawKeyLog(t) {
  const rows = t.key_log ?? [];
  $("keys-section").hidden = rows.length === 0;
  if (rows.length === 0) return;
  const last = rows.at(-1);
  $("keys-summary").textContent =
    `${rows.length} key ${rows.length === 1 ? "event" : "events"}; the current key is key ${short(last.public_key)}. ` +
    "Each entry must be signed by the key the log names for its place in the chain.";
  const list = $("key-log");
  list.replaceChildren();
  for (const r of rows) {
    const item = el(
      "li",
      { class: "key-event" },
      el("p", { class: "entry-title" }, el("strong", {}, `Event ${r.index}: ${r.kind}`), ` · by the ${r.authority} key · accepted ${r.accepted_at}`),
    );
    const dl = el("dl", { class: "facts small" });
    fact(dl, "Key after it", r.public_key, true);
    fact(dl, "Signs from", `entry ${r.history_sequence}`);
    if (r.disputes_after) {
      fact(dl, "Disputes", `the versions after seq ${r.disputes_after.seq} (the owner's last good write, ${short(r.disputes_after.cursor)})`);
    }
    item.append(dl);
    list.append(item);
  }
}

function versionLabel(e) {
  return `seq ${e.seq} (entry ${e.sequence}, ${e.accepted_at})`;
}

function drawTimeline(entries) {
  const list = $("timeline");
  list.replaceChildren();
  const bad = entries.filter((e) => e.failures.length).length;
  $("timeline-summary").textContent =
    `${entries.length} retained ${entries.length === 1 ? "version" : "versions"}, newest first` +
    (bad ? `; ${bad} with a failing check.` : "; every one passes every check.") +
    (entries.some((e) => e.withheld) ? " Withheld versions were written private." : "");
  for (const t of [...entries].reverse()) {
    const e = t.entry;
    const w = t.withheld;
    const ok = t.failures.length === 0;
    const checks = [...new Set(t.failures.map((f) => f.check))];
    const d = t.disputed;
    const badge = !ok ? `✗ failed: ${checks.join(", ")}` : w ? "◌ withheld" : d ? "⚠ disputed" : "✓ verified";
    const title = e
      ? el("strong", {}, `Entry ${e.sequence}`)
      : w
        ? el("strong", {}, `Entry ${w.sequence}`)
        : el("strong", {}, `Item ${t.position} (unreadable)`);
    const item = el(
      "li",
      { id: `entry-${t.position}`, class: `entry ${ok ? (w ? "withheld" : d ? "disputed" : "ok") : "bad"}`, tabindex: "-1" },
      el(
        "p",
        { class: "entry-title" },
        el("span", { class: "badge" }, badge),
        " ",
        title,
        e ? ` · seq ${e.seq} · accepted ${e.accepted_at}` : "",
        w ? " · written private: its place and seal are checked, its content is not shown to this reader" : "",
        d ? " · disputed: written with a key the owner has since rotated out, after its last good write; it verifies, and it is not the owner's" : "",
      ),
    );
    if (e || w) {
      const dl = el("dl", { class: "facts small" });
      if (e) fact(dl, "Cursor", e.cursor, true);
      fact(dl, "Hash", short(e ? e.hash : w.hash), true);
      fact(dl, "Sealed by", e ? e.signed_by : w.signed_by, true);
      item.append(dl);
    }
    if (!ok) {
      item.append(
        el(
          "ul",
          { class: "failures" },
          t.failures.map((f) => el("li", {}, el("code", {}, f.check), `: ${f.detail}`)),
        ),
      );
    }
    const i = e ? versions.indexOf(e) : -1;
    if (i > 0) {
      const button = el("button", { type: "button", class: "link" }, `Changes from seq ${versions[i - 1].seq}`);
      button.addEventListener("click", () => compare(i - 1, i));
      item.append(button);
    }
    list.append(item);
  }
}

let versions = [];

function drawDiffChoices(readable) {
  versions = readable.map((t) => t.entry);
  const failed = readable.map((t) => t.failures.length > 0);
  const from = $("diff-from");
  const to = $("diff-to");
  for (const select of [from, to]) {
    select.replaceChildren(
      ...versions.map((e, i) => el("option", { value: i }, versionLabel(e) + (failed[i] ? " (fails checks)" : ""))),
    );
    select.disabled = versions.length < 2;
  }
  from.value = String(Math.max(0, versions.length - 2));
  to.value = String(Math.max(0, versions.length - 1));
  drawDiff();
}

/** Shows the diff between versions `from` and `to` (indexes, oldest first). */
function compare(from, to) {
  $("diff-from").value = String(from);
  $("diff-to").value = String(to);
  drawDiff();
  $("diff-heading").scrollIntoView();
  $("diff-from").focus({ preventScroll: true });
}

function value(v) {
  return v === undefined ? "" : json(v);
}

function drawDiff() {
  const list = $("diff");
  list.replaceChildren();
  const summary = $("diff-summary");
  if (versions.length < 2) {
    summary.textContent =
      "Only one version is retained, so there is nothing to compare (the free tier keeps the latest only).";
    return;
  }
  const a = versions[Number($("diff-from").value)];
  const b = versions[Number($("diff-to").value)];
  const changes = JSON.parse(diff(json(a.capsule), json(b.capsule)));
  summary.textContent = changes.length
    ? `${changes.length} ${changes.length === 1 ? "change" : "changes"} from seq ${a.seq} to seq ${b.seq}.`
    : `No change in the capsule from seq ${a.seq} to seq ${b.seq}.`;
  for (const c of changes) {
    const path = el("code", { class: "path" }, c.path || "(the whole capsule)");
    let line;
    switch (c.kind) {
      case "added":
        line = ["added ", el("code", { class: "after" }, value(c.after))];
        break;
      case "removed":
        line = ["removed ", el("code", { class: "before" }, value(c.before))];
        break;
      case "reordered":
        line = ["reordered: ", el("code", {}, value(c.before)), " → ", el("code", {}, value(c.after))];
        break;
      default:
        line = [el("code", { class: "before" }, value(c.before)), " → ", el("code", { class: "after" }, value(c.after))];
    }
    list.append(el("li", { class: `change ${c.kind}` }, path, ": ", ...line));
  }
}

// --- wiring ----------------------------------------------------------------

$("agent-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = $("agent").value;
  const url = new URL(location.href);
  url.searchParams.set("agent", id.trim().toLowerCase());
  history.pushState(null, "", url);
  openAgent(id);
});
$("file").addEventListener("change", (ev) => openFile(ev.target.files[0]));
$("keys-file").addEventListener("change", () => openFile(lastFile));
$("diff-from").addEventListener("change", drawDiff);
$("diff-to").addEventListener("change", drawDiff);

const drop = $("drop");
document.addEventListener("dragover", (ev) => {
  ev.preventDefault();
  drop.classList.add("dragging");
});
document.addEventListener("dragleave", () => drop.classList.remove("dragging"));
document.addEventListener("drop", (ev) => {
  ev.preventDefault();
  drop.classList.remove("dragging");
  openFile(ev.dataTransfer?.files?.[0]);
});

function fromUrl() {
  const agent = new URLSearchParams(location.search).get("agent");
  if (agent) openAgent(agent);
}
window.addEventListener("popstate", fromUrl);
core.then(
  () => (document.documentElement.dataset.core = "ready"),
  (e) => status(`The verifier could not start: ${e.message}`, "bad"),
);
fromUrl();
