#!/usr/bin/env node
// Every generated file of the repository, and the one command that rebuilds or
// checks them all (docs/GENERATED.md says the same for readers).
//
//   npm run regen                         # every generator writes its files
//   npm run regen:check                   # every generator checks; exit 1 on drift
//   node scripts/regen.mjs [--check] NAME...   # only the named generators
//   node scripts/regen.mjs --list         # the list below, as a table
//
// One convention for all of them: a Rust generator is a test that fails when a
// committed file is not byte for byte what it would write, and writes it under
// SELFCAP_REGEN=1; a script generator writes by default and compares under
// --check. The Rust ones run in one `cargo test --locked --workspace --lib
// --test ...` call filtered to their tests, which reuses the test binaries of
// `cargo test --locked --workspace` (same profile, same features: nothing
// compiles twice), and the driver looks for each test's own "ok", so a
// renamed test cannot pass by running nothing. A generator whose tool is
// missing fails (never skips) and says how to install it. Check mode also
// holds docs/GENERATED.md and .gitattributes to this list.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const INSTALL = "run `bash scripts/install-tools.sh` (npm test does)";
const CORPUS_DEPS = "tests/corpus/public/gen/.deps";

/**
 * The generators. `files` are wholly generated (each is a line of
 * .gitattributes marked linguist-generated); `blocks` are hand-written files
 * with one generated block between markers; `what`, `source` and `generator`
 * are for people (--list). `rust` names the generator test (its cargo target,
 * its full name); `run` is the script's command (plus --check in check
 * mode); `needs` says what is missing to run it, or null.
 */
const GENERATORS = [
  {
    name: "reason-codes",
    files: [],
    blocks: ["docs/PROTOCOL.md"],
    what: "the reason-code table (between the `reason-codes` markers)",
    source: "`src/core/reason.rs`",
    rust: { target: "--test protocol_doc", test: "protocol_doc_lists_every_reason_code" },
    generator: "`tests/protocol_doc.rs`",
  },
  {
    name: "vectors",
    files: ["tests/vectors/capsules.json", "tests/vectors/envelopes.json", "tests/vectors/signing.json", "tests/vectors/signatures.json"],
    blocks: [],
    what: "the conformance vectors",
    source: "the case list in `tests/vectors.rs` (and `tests/vectors/spec_example_capsule.json`, hand-written)",
    rust: { target: "--test vectors", test: "files_match_the_specified_cases" },
    generator: "`tests/vectors.rs`",
  },
  {
    name: "history-vectors",
    files: ["tests/vectors/history/*.json"],
    blocks: [],
    what: "the history mutation vectors, one export bundle per case",
    source: "the case list in `tests/history_vectors.rs`",
    rust: { target: "--test history_vectors", test: "history_files_match_the_specified_cases" },
    generator: "`tests/history_vectors.rs`",
  },
  {
    name: "key-log-vectors",
    files: ["tests/vectors/keys/*.json"],
    blocks: [],
    what: "the key-log vectors, one scenario per file, and the verifier's cases",
    source: "the scenario list in `tests/key_log_vectors.rs`",
    rust: { target: "--test key_log_vectors", test: "key_log_files_match_the_specified_cases" },
    generator: "`tests/key_log_vectors.rs`",
  },
  {
    name: "watch-vectors",
    files: ["tests/vectors/watch/*.json"],
    blocks: [],
    what: "the projection vectors: watches resolved against a ddv1 catalog, and their cursors",
    source: "the case list in `tests/watch_vectors.rs`",
    rust: { target: "--test watch_vectors", test: "projection_file_matches_the_specified_cases" },
    generator: "`tests/watch_vectors.rs`",
  },
  {
    name: "lexicon",
    files: ["src/core/safety/lexicon/table.rs"],
    blocks: [],
    what: "the lexicon's perfect-hash maps",
    source: "`src/core/safety/lexicon/languages/*.rs`",
    rust: { target: "--lib", test: "core::safety::lexicon::generate::table_rs_is_what_the_language_files_compile_to" },
    generator: "`src/core/safety/lexicon/generate.rs`",
  },
  {
    name: "automata",
    files: ["src/core/safety/automata/rules.bin"],
    blocks: [],
    what: "the scanner's compiled automata",
    source: "the patterns of the rule table (`src/core/safety/rules/`, gathered by `engine::sources`), compiled by the `regex-automata` of `Cargo.lock`",
    rust: { target: "--lib", test: "core::safety::automata::generate::tests::rules_bin_is_what_the_rule_table_compiles_to" },
    generator: "`src/core/safety/automata/generate.rs`",
  },
  {
    name: "bip39",
    files: ["src/core/safety/bip39/wordlists.bin"],
    blocks: [],
    what: "the BIP-39 word lists' compact lookup keys",
    source: "the vendored official lists, `src/core/safety/bip39/upstream/*.txt`",
    rust: { target: "--lib", test: "core::safety::bip39::tests::wordlists_bin_is_what_the_upstream_files_encode_to" },
    generator: "`src/core/safety/bip39/mod.rs`",
  },
  {
    name: "signed-reads",
    files: ["tests/vectors/signed_reads.json"],
    blocks: [],
    what: "signed reads made by an independent signer (npm `http-message-sig`, Node's Ed25519)",
    source: "the cases in `scripts/gen-read-vectors.mjs`",
    run: ["node", "scripts/gen-read-vectors.mjs"],
    generator: "`scripts/gen-read-vectors.mjs`",
    needs: () => npmPackage("http-message-sig"),
  },
  {
    name: "test-token",
    files: ["tests/fixtures/TestUSDC.json"],
    blocks: [],
    what: "the test ERC-20's ABI and bytecode",
    source: "`tests/fixtures/TestUSDC.sol`, compiled by npm `solc` 0.8.30",
    run: ["node", "tests/fixtures/build-token.mjs"],
    generator: "`tests/fixtures/build-token.mjs`",
    needs: () => npmPackage("solc"),
  },
  {
    name: "receipts",
    files: ["tests/fixtures/receipts/*.json"],
    blocks: [],
    what: "JSON-RPC answers recorded from a local anvil chain, one file per payment case",
    source: "the cases in `tests/fixtures/record-receipts.mjs`, `tests/fixtures/TestUSDC.json`, anvil 1.7.1 (npm)",
    run: ["node", "tests/fixtures/record-receipts.mjs"],
    generator: "`tests/fixtures/record-receipts.mjs`",
    needs: anvil,
  },
  {
    name: "x402-token",
    files: ["tests/fixtures/x402/TestUSDC3009.json"],
    blocks: [],
    what: "the EIP-3009 test USDC's ABI and bytecode (x402 payments)",
    source: "`tests/fixtures/x402/TestUSDC3009.sol` on npm `@openzeppelin/contracts` 5.7.0, compiled by npm `solc` 0.8.30",
    run: ["node", "tests/fixtures/x402/build-token.mjs"],
    generator: "`tests/fixtures/x402/build-token.mjs`",
    needs: () => npmPackage("solc"),
  },
  {
    name: "x402-payments",
    files: ["tests/vectors/x402/payments.json"],
    blocks: [],
    what: "x402 payment headers made by the official payers (npm `@x402/fetch` 2.27.0, `x402-fetch` 1.2.0) for one fixed invoice",
    source: "the invoice, key, clock and nonce in `tests/fixtures/x402/record-payments.mjs`",
    run: ["node", "tests/fixtures/x402/record-payments.mjs"],
    generator: "`tests/fixtures/x402/record-payments.mjs`",
    needs: () => npmPackage("@x402/fetch"),
  },
  {
    name: "x402-client-vectors",
    files: ["tests/vectors/x402/client-payloads.json"],
    blocks: [],
    what: "x402 402 challenges and payment headers made by the official client library (npm `@x402/core`, `@x402/evm` 2.27.0) for chains 8453, 84532 and 31337",
    source: "the fixed clock, key, nonces and requirements in `tests/vectors/x402/make-vectors.mjs`",
    run: ["node", "tests/vectors/x402/make-vectors.mjs"],
    generator: "`tests/vectors/x402/make-vectors.mjs`",
    needs: () => npmPackage("@x402/evm"),
  },
  {
    name: "x402-facilitator-answers",
    files: ["tests/vectors/x402/facilitator-answers.json"],
    blocks: [],
    what: "/verify and /settle answers of the official facilitator (npm `@x402/core`, `@x402/evm` 2.27.0) over a stand-in chain",
    source: "the cases in `tests/vectors/x402/make-facilitator-answers.mjs` over `client-payloads.json`",
    run: ["node", "tests/vectors/x402/make-facilitator-answers.mjs"],
    generator: "`tests/vectors/x402/make-facilitator-answers.mjs`",
    needs: () => npmPackage("@x402/evm"),
  },
  {
    name: "x402-cdp-jwt",
    files: ["tests/vectors/x402/cdp-jwt.json"],
    blocks: [],
    what: "Coinbase CDP Bearer JWTs (EdDSA) made by the official npm `@coinbase/cdp-sdk` 1.57.0 `generateJwt` for a test Ed25519 key, fixed clocks and nonces",
    source: "the test key, clocks, nonces and requests in `tests/vectors/x402/make-cdp-jwt.mjs`",
    run: ["node", "tests/vectors/x402/make-cdp-jwt.mjs"],
    generator: "`tests/vectors/x402/make-cdp-jwt.mjs`",
    needs: () => npmPackage("@coinbase/cdp-sdk"),
  },
  {
    name: "corpus",
    files: [],
    blocks: ["tests/corpus/public/unsafe.tsv", "tests/corpus/public/benign.tsv"],
    what: "the generated samples of the public safety corpus (between the `GENERATED` markers)",
    source: "`tests/corpus/public/gen/build.py` (a seeded RNG; PyPI packages pinned in `gen/requirements.txt`)",
    run: ["python3", "tests/corpus/public/gen/build.py"],
    env: { PYTHONPATH: CORPUS_DEPS },
    generator: "`tests/corpus/public/gen/build.py`",
    needs: corpusPackages,
  },
];

function npmPackage(name) {
  try {
    createRequire(path.join(ROOT, "package.json")).resolve(name);
    return null;
  } catch {
    return `the npm package ${name} is not installed: ${INSTALL}`;
  }
}

async function anvil() {
  try {
    (await import("./chain.mjs")).anvilBinary();
    return null;
  } catch (e) {
    return e.message;
  }
}

function corpusPackages() {
  const r = spawnSync("python3", ["-c", "import Crypto, cryptography, mnemonic, nacl"], {
    cwd: ROOT,
    env: { ...process.env, PYTHONPATH: CORPUS_DEPS },
    encoding: "utf8",
  });
  if (r.error) return `python3 is not installed (${r.error.message})`;
  if (r.status !== 0) return `the corpus generator's PyPI packages are not in ${CORPUS_DEPS}: ${INSTALL}`;
  return null;
}

const args = process.argv.slice(2);
const CHECK = args.includes("--check");
const names = args.filter((a) => !a.startsWith("--"));

if (args.includes("--list")) {
  for (const g of GENERATORS) {
    const command = g.rust ? `cargo test --locked ${g.rust.target} -- --exact ${g.rust.test} (SELFCAP_REGEN=1 writes)` : g.run.join(" ");
    const writes = [...g.files, ...g.blocks.map((b) => `${b} (a block in it)`)].join(", ");
    const plain = (s) => s.replaceAll("`", "");
    console.log(`${g.name}: ${plain(g.what)}\n  writes   ${writes}\n  from     ${plain(g.source)}\n  by       ${plain(g.generator)}\n  command  ${command}`);
  }
  process.exit(0);
}

const unknown = names.filter((n) => !GENERATORS.some((g) => g.name === n));
if (unknown.length) {
  console.error(`regen: no generator named ${unknown.join(", ")} (known: ${GENERATORS.map((g) => g.name).join(", ")})`);
  process.exit(2);
}
const chosen = names.length ? GENERATORS.filter((g) => names.includes(g.name)) : GENERATORS;
const failures = [];
const seconds = (t) => `${((performance.now() - t) / 1000).toFixed(1)} s`;
const started = performance.now();

// Every tool first: a missing one fails the run before any work is done.
for (const g of chosen) {
  const missing = g.needs && (await g.needs());
  if (missing) failures.push(`${g.name}: ${missing}`);
}
if (failures.length) finish("Install what is missing, then run this again.");

// The Rust generators: one cargo call, writing under SELFCAP_REGEN=1,
// checking without it (unset even if the caller's shell exports it). `--lib`
// is always selected: with it, cargo resolves the same features as `cargo test
// --locked --workspace` and reuses its binaries; without it, a call with only
// `--test` targets would rebuild the library (and so would the next full run).
const rust = chosen.filter((g) => g.rust);
if (rust.length) {
  const t = performance.now();
  const targets = [...new Set(["--lib", ...rust.filter((g) => g.rust.target !== "--lib").map((g) => g.rust.target)])];
  const cargo = ["test", "--locked", "--workspace", "--no-fail-fast", ...targets.flatMap((x) => x.split(" ")), "--", "--exact", ...rust.map((g) => g.rust.test)];
  const env = { ...process.env, RUST_BACKTRACE: "0" }; // a stale file's message is the whole story
  if (CHECK) delete env.SELFCAP_REGEN;
  else env.SELFCAP_REGEN = "1";
  console.log(`regen: ${CHECK ? "" : "SELFCAP_REGEN=1 "}cargo ${cargo.join(" ")}`);
  const r = spawnSync("cargo", cargo, { cwd: ROOT, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 });
  if (r.error) {
    failures.push(`cargo could not be run (${r.error.message}): install Rust with rustup, then ${INSTALL}`);
  } else {
    // Each generator test must have run (a renamed test would otherwise pass
    // by running nothing) and passed. Their names are unique in the workspace.
    const lines = r.stdout.split("\n");
    const before = failures.length;
    for (const g of rust) {
      if (lines.includes(`test ${g.rust.test} ... ok`)) continue;
      failures.push(lines.includes(`test ${g.rust.test} ... FAILED`)
        ? `${g.name}: ${CHECK ? "stale" : "could not be written"} (the cargo output above says why)`
        : `${g.name}: its test ${g.rust.test} did not run (renamed? update scripts/regen.mjs)`);
    }
    if (r.status !== 0 || failures.length > before) {
      process.stdout.write(r.stdout);
      if (failures.length === before) failures.push(`cargo ${cargo.join(" ")} failed (status ${r.status})`);
    } else {
      console.log(`regen: ${rust.map((g) => g.name).join(", ")}: ${CHECK ? "up to date" : "regenerated"} (${seconds(t)})`);
    }
  }
}

// The script generators, one at a time.
for (const g of chosen.filter((g) => g.run)) {
  const t = performance.now();
  const [cmd, ...rest] = g.run;
  const r = spawnSync(cmd, [...rest, ...(CHECK ? ["--check"] : [])], {
    cwd: ROOT,
    env: { ...process.env, ...g.env },
    stdio: "inherit",
  });
  if (r.error) failures.push(`${g.name}: ${cmd} could not be run (${r.error.message})`);
  else if (r.status !== 0) failures.push(`${g.name}: ${CHECK ? "stale, or its check failed" : "failed"} (${g.run.join(" ")}${CHECK ? " --check" : ""}: status ${r.status})`);
  else console.log(`regen: ${g.name} (${seconds(t)})`);
}

// The index itself: docs/GENERATED.md names every output, and .gitattributes
// marks every wholly generated file.
if (CHECK && !names.length) {
  const doc = readFileSync(path.join(ROOT, "docs/GENERATED.md"), "utf8");
  const attributes = readFileSync(path.join(ROOT, ".gitattributes"), "utf8").split("\n").map((l) => l.trim());
  for (const g of GENERATORS) {
    for (const f of [...g.files, ...g.blocks]) {
      if (!doc.includes(`\`${f}\``)) failures.push(`docs/GENERATED.md does not list \`${f}\` (${g.name}): add it to its table`);
      if (!f.includes("*") && !existsSync(path.join(ROOT, f))) failures.push(`${f} (${g.name}) does not exist: npm run regen writes it`);
    }
    for (const f of g.files) {
      if (!attributes.some((l) => l.split(/\s+/)[0] === f && l.split(/\s+/).includes("linguist-generated"))) {
        failures.push(`.gitattributes does not mark ${f} (${g.name}): add the line \"${f} linguist-generated\"`);
      }
    }
  }
}

finish(CHECK ? "Regenerate with `npm run regen` (docs/GENERATED.md), then review the diff." : "");

function finish(hint) {
  if (failures.length) {
    console.error(`\nregen${CHECK ? ":check" : ""}: ${failures.length} problem(s):\n${failures.map((f) => `  - ${f}`).join("\n")}`);
    if (hint) console.error(hint);
    process.exit(1);
  }
  console.log(`regen${CHECK ? ":check" : ""}: ${chosen.length} generator(s) ${CHECK ? "up to date" : "regenerated"} (${seconds(started)})`);
  process.exit(0);
}
