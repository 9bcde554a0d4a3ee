// A real local EVM chain for tests: spawns the `anvil` binary of Foundry's npm
// release 1.7.1, which ships inside a platform package. The repo pins
// @foundry-rs/anvil-linux-amd64 as an optional dependency: the wrapper package
// @foundry-rs/anvil lists every platform, and the others are not in this
// registry, so its lockfile could never satisfy `npm ci`. Bound to 127.0.0.1
// on a free port, with a
// few hand-rolled JSON-RPC helpers to deploy the test USDC token
// (tests/fixtures/TestUSDC.json), mint, transfer and mine. Node >= 20, no other
// dependencies, works offline.
//
//   import { startAnvil, placeTokenAt, mint, transfer, mine, BASE_USDC } from '../../scripts/chain.mjs';
//   const chain = await startAnvil({ chainId: 8453 });
//   try {
//     const [deployer, payer, treasury] = chain.accounts;
//     const usdc = await placeTokenAt(chain.rpcUrl, BASE_USDC);
//     await mint(chain.rpcUrl, usdc, deployer, payer, 10_000_000n);
//     const txHash = await transfer(chain.rpcUrl, usdc, payer, treasury, 5_004_217n);
//     await mine(chain.rpcUrl, 3);
//   } finally {
//     await chain.stop();
//   }
//
// If the anvil binary is missing, startAnvil throws: a test that needs a chain
// must fail, never silently pass or skip.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const requireFromRoot = createRequire(join(ROOT, 'package.json'));

/** The anvil version pinned in package.json's devDependencies. */
export const ANVIL_VERSION = '1.7.1';
/** Anvil's own default chain id. */
export const ANVIL_CHAIN_ID = 31337;
/** Base mainnet's chain id: the default here, since the service targets Base. */
export const BASE_CHAIN_ID = 8453;
/** Canonical USDC contract on Base mainnet (checksummed). */
export const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
/** keccak256("Transfer(address,address,uint256)"): topic0 of an ERC-20 Transfer log. */
export const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
/** 4-byte function selectors (first 4 bytes of keccak256 of the signature). */
export const SELECTORS = Object.freeze({
  'transfer(address,uint256)': '0xa9059cbb',
  'mint(address,uint256)': '0x40c10f19',
  'balanceOf(address)': '0x70a08231',
  'approve(address,uint256)': '0x095ea7b3',
  'transferFrom(address,address,uint256)': '0x23b872dd',
  'transferMany(address[],uint256[])': '0xb7fc6612',
  'decimals()': '0x313ce567',
});

/** The compiled test token: {abi, bytecode, deployedBytecode, solc, source_sha256}. */
export const TOKEN_ARTIFACT_PATH = join(ROOT, 'tests', 'fixtures', 'TestUSDC.json');
let tokenArtifact;
/** Loads tests/fixtures/TestUSDC.json (cached). */
export function loadToken() {
  tokenArtifact ??= JSON.parse(readFileSync(TOKEN_ARTIFACT_PATH, 'utf8'));
  return tokenArtifact;
}

const PLATFORM_PACKAGES = {
  'linux-x64': '@foundry-rs/anvil-linux-amd64',
  'linux-arm64': '@foundry-rs/anvil-linux-arm64',
  'darwin-x64': '@foundry-rs/anvil-darwin-amd64',
  'darwin-arm64': '@foundry-rs/anvil-darwin-arm64',
  'win32-x64': '@foundry-rs/anvil-win32-amd64',
};

/**
 * Path of the anvil executable: $ANVIL_BIN if set, else the binary inside the
 * platform package (see the top of this file) in node_modules. Throws a
 * clear error if it is not there.
 */
export function anvilBinary() {
  if (process.env.ANVIL_BIN) {
    if (!existsSync(process.env.ANVIL_BIN)) {
      throw new Error(`ANVIL_BIN=${process.env.ANVIL_BIN} does not exist`);
    }
    return process.env.ANVIL_BIN;
  }
  const key = `${process.platform}-${process.arch}`;
  const pkg = PLATFORM_PACKAGES[key];
  if (!pkg) throw new Error(`anvil: no @foundry-rs/anvil binary package for platform ${key}`);
  const exe = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  let path;
  try {
    path = requireFromRoot.resolve(`${pkg}/bin/${exe}`);
  } catch {
    path = join(ROOT, 'node_modules', ...pkg.split('/'), 'bin', exe);
  }
  if (!existsSync(path)) {
    throw new Error(
      `anvil binary not found (looked for ${path}). It comes from the devDependency ` +
        `${pkg}@${ANVIL_VERSION} (an optional dependency of this repo, Linux x64 only in this registry): run 'npm ci' ` +
        `in ${ROOT} (or set ANVIL_BIN). Tests that need a local chain cannot run without it.`,
    );
  }
  return path;
}

// ---------------------------------------------------------------------------
// Process lifetime: every anvil we start is killed on stop(), on process exit,
// and on SIGINT/SIGTERM (then the signal is re-raised with its default action).

const live = new Set();
let hooksInstalled = false;
function killAllSync() {
  for (const child of live) {
    try { child.kill('SIGKILL'); } catch { /* already gone */ }
  }
  live.clear();
}
function installExitHooks() {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killAllSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    const onSignal = () => {
      killAllSync();
      process.off(sig, onSignal);
      // Only re-raise if nobody else handles it; otherwise leave it to them.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

/**
 * Starts anvil on 127.0.0.1 (a free port chosen by the OS) and waits until its
 * JSON-RPC answers eth_chainId with the requested chain id.
 *
 * @param {object} [opts]
 * @param {number} [opts.chainId=8453] chain id (Base mainnet by default; anvil's own default is 31337).
 * @param {number} [opts.blockTime] seconds between blocks (interval mining); default: automine, one block per tx.
 * @param {number} [opts.timestamp] genesis block timestamp (unix seconds), for reproducible blocks.
 * @param {string[]} [opts.args] extra anvil arguments.
 * @param {number} [opts.startTimeoutMs=20000]
 * @returns {Promise<{rpcUrl: string, port: number, chainId: number, accounts: string[], pid: number,
 *   logs: () => string, stop: () => Promise<void>}>}
 *   accounts are anvil's unlocked dev accounts (lower-case hex), 10000 ETH each.
 */
export async function startAnvil(opts = {}) {
  const { chainId = BASE_CHAIN_ID, blockTime, timestamp, args = [], startTimeoutMs = 20_000 } = opts;
  if (!Number.isSafeInteger(chainId) || chainId <= 0) throw new Error(`bad chainId ${chainId}`);
  const bin = anvilBinary();
  const argv = ['--host', '127.0.0.1', '--port', '0', '--chain-id', String(chainId), '--color', 'never'];
  if (blockTime !== undefined) argv.push('--block-time', String(blockTime));
  if (timestamp !== undefined) argv.push('--timestamp', String(timestamp));
  argv.push(...args);

  installExitHooks();
  const env = { ...process.env };
  delete env.ANVIL_IP_ADDR;
  const child = spawn(bin, argv, { stdio: ['ignore', 'pipe', 'pipe'], env });
  live.add(child);

  // Keep the last lines of output for error messages; keep draining so the
  // pipe never fills up (anvil logs every RPC call).
  const tail = [];
  let partial = '';
  let resolvePort;
  const portPromise = new Promise((r) => { resolvePort = r; });
  const onData = (chunk) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop();
    for (const line of lines) {
      tail.push(line);
      if (tail.length > 200) tail.shift();
      const m = /Listening on 127\.0\.0\.1:(\d+)/.exec(line);
      if (m) resolvePort(Number(m[1]));
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const logs = () => [...tail, partial].join('\n');

  let exited = false;
  const exitPromise = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      exited = true;
      live.delete(child);
      resolve({ code, signal });
    });
  });
  const spawnError = new Promise((_, reject) => child.on('error', reject));
  spawnError.catch(() => {}); // only awaited during startup

  const stop = async () => {
    if (exited) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => { if (!exited) child.kill('SIGKILL'); }, 3000);
    await exitPromise;
    clearTimeout(t);
  };

  try {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`anvil did not start within ${startTimeoutMs} ms`)), startTimeoutMs);
    });
    const earlyExit = exitPromise.then(({ code, signal }) => {
      throw new Error(`anvil exited during startup (code ${code}, signal ${signal})`);
    });
    earlyExit.catch(() => {}); // only awaited during startup; a later stop() must not reject it unhandled
    try {
      const port = await Promise.race([portPromise, earlyExit, spawnError, timeout]);
      const rpcUrl = `http://127.0.0.1:${port}`;
      const deadline = Date.now() + startTimeoutMs;
      const ready = (async () => {
        for (;;) {
          try {
            return await rpc(rpcUrl, 'eth_chainId', [], { timeoutMs: 2000 });
          } catch (e) {
            if (exited || Date.now() > deadline) throw e;
            await sleep(50);
          }
        }
      })();
      ready.catch(() => {});
      const got = await Promise.race([ready, earlyExit, timeout]);
      if (Number(got) !== chainId) throw new Error(`anvil answered eth_chainId ${got}, expected ${chainId}`);
      const accounts = await rpc(rpcUrl, 'eth_accounts', []);
      // A forgotten stop() must not keep the test process alive; the exit hook kills it.
      child.unref();
      child.stdout.unref?.();
      child.stderr.unref?.();
      return { rpcUrl, port, chainId, accounts, pid: child.pid, logs, stop };
    } finally {
      clearTimeout(timer);
    }
  } catch (e) {
    await stop();
    throw new Error(`${e.message}\n--- anvil (${bin} ${argv.join(' ')}) output ---\n${logs()}`);
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// ---------------------------------------------------------------------------
// JSON-RPC

let nextId = 1;
/**
 * One JSON-RPC 2.0 call. Returns `result`; throws on a transport error or an
 * `error` member (the error carries .code and .data).
 */
export async function rpc(url, method, params = [], { timeoutMs = 30_000 } = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${method}: HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`);
  }
  if (body.error) {
    const err = new Error(`${method}: ${body.error.message} (code ${body.error.code})`);
    err.code = body.error.code;
    err.data = body.error.data;
    throw err;
  }
  if (!('result' in body)) throw new Error(`${method}: HTTP ${res.status}, no result: ${text.slice(0, 200)}`);
  return body.result;
}

/** Polls eth_getTransactionReceipt until the tx is mined; returns the receipt. */
export async function waitForReceipt(rpcUrl, txHash, { timeoutMs = 30_000, pollMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await rpc(rpcUrl, 'eth_getTransactionReceipt', [txHash]);
    if (receipt) return receipt;
    if (Date.now() > deadline) throw new Error(`transaction ${txHash} not mined within ${timeoutMs} ms`);
    await sleep(pollMs);
  }
}

/** Mines `n` blocks now (anvil_mine). */
export async function mine(rpcUrl, n = 1) {
  await rpc(rpcUrl, 'anvil_mine', [`0x${BigInt(n).toString(16)}`]);
}

// ---------------------------------------------------------------------------
// ABI encoding by hand: selector + 32-byte words.

function checkAddress(a, what = 'address') {
  if (typeof a !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(a)) throw new Error(`bad ${what}: ${a}`);
  return a;
}
/** 32-byte word of an address (left-padded). */
export function wordAddress(a) {
  return checkAddress(a).slice(2).toLowerCase().padStart(64, '0');
}
/** 32-byte word of a uint256 given as bigint, safe integer or decimal/0x string. */
export function wordUint(v) {
  const n = typeof v === 'bigint' ? v : BigInt(v);
  if (n < 0n || n >= 1n << 256n) throw new Error(`uint256 out of range: ${v}`);
  return n.toString(16).padStart(64, '0');
}
/** Calldata: selector + static words (hex strings of 64 chars). */
export function encodeCall(signature, words) {
  const sel = SELECTORS[signature];
  if (!sel) throw new Error(`unknown selector for ${signature}`);
  return sel + words.join('');
}
/** Calldata for transferMany(address[],uint256[]). */
export function encodeTransferMany(transfers) {
  const n = transfers.length;
  const head = [wordUint(0x40), wordUint(0x40 + 32 * (1 + n))];
  const tos = [wordUint(n), ...transfers.map((t) => wordAddress(t.to))];
  const values = [wordUint(n), ...transfers.map((t) => wordUint(t.amount))];
  return encodeCall('transferMany(address[],uint256[])', [...head, ...tos, ...values]);
}

/**
 * eth_sendTransaction from an unlocked dev account. Without `gas`, the gas
 * limit is eth_estimateGas (against the pending block) + 20%, and a call that
 * would revert throws here. With `gas` (a manual gas limit) nothing is
 * estimated, so a call that reverts is still mined (receipt status 0x0).
 * (Left to itself, anvil 1.7.1 would not estimate: it sends every tx with the
 * whole block gas limit, so only one tx fits in a block.)
 * Returns the tx hash; with `wait: true`, waits until it is mined first.
 */
export async function sendTx(rpcUrl, { from, to, data, value, gas, wait = false }) {
  const tx = { from: checkAddress(from, 'from') };
  if (to !== undefined) tx.to = checkAddress(to, 'to');
  if (data !== undefined) tx.data = data;
  if (value !== undefined) tx.value = `0x${BigInt(value).toString(16)}`;
  if (gas === undefined) {
    let estimate;
    try {
      estimate = BigInt(await rpc(rpcUrl, 'eth_estimateGas', [tx, 'pending']));
    } catch (e) {
      throw new Error(`${e.message}; the transaction would fail (pass a manual gas limit to mine it anyway)`);
    }
    gas = (estimate * 6n) / 5n;
  }
  tx.gas = `0x${BigInt(gas).toString(16)}`;
  const hash = await rpc(rpcUrl, 'eth_sendTransaction', [tx]);
  if (wait) await waitForReceipt(rpcUrl, hash);
  return hash;
}

/** Deploys a fresh TestUSDC from `from`; waits for it to be mined; returns its address. */
export async function deployToken(rpcUrl, from) {
  const hash = await sendTx(rpcUrl, { from, data: loadToken().bytecode });
  const receipt = await waitForReceipt(rpcUrl, hash);
  if (receipt.status !== '0x1' || !receipt.contractAddress) {
    throw new Error(`TestUSDC deployment failed: ${JSON.stringify(receipt)}`);
  }
  return receipt.contractAddress;
}

/**
 * Puts TestUSDC's runtime code at `address` (anvil_setCode), e.g. BASE_USDC.
 * Storage there starts empty: zero supply and balances; name, symbol and
 * decimals are constants in the code; mint works at once. Returns `address`.
 */
export async function placeTokenAt(rpcUrl, address) {
  const code = loadToken().deployedBytecode;
  await rpc(rpcUrl, 'anvil_setCode', [checkAddress(address), code]);
  const got = await rpc(rpcUrl, 'eth_getCode', [address, 'latest']);
  if (got.toLowerCase() !== code.toLowerCase()) throw new Error(`anvil_setCode did not take at ${address}`);
  return address;
}

/** token.mint(to, amountAtomic) sent by `from`; waits until mined (so a transfer can follow); returns the tx hash. */
export async function mint(rpcUrl, token, from, to, amountAtomic) {
  const hash = await sendTx(rpcUrl, {
    from,
    to: token,
    data: encodeCall('mint(address,uint256)', [wordAddress(to), wordUint(amountAtomic)]),
  });
  const receipt = await waitForReceipt(rpcUrl, hash);
  if (receipt.status !== '0x1') throw new Error(`mint reverted: ${hash}`);
  return hash;
}

/**
 * token.transfer(to, amountAtomic) sent by `from`. Returns the tx hash at once
 * (automine mines it immediately; with blockTime use waitForReceipt). opts.gas
 * sets a manual gas limit (no estimation: a failing transfer is mined and
 * reverts); opts.wait waits until mined.
 */
export async function transfer(rpcUrl, token, from, to, amountAtomic, opts = {}) {
  return sendTx(rpcUrl, {
    from,
    to: token,
    data: encodeCall('transfer(address,uint256)', [wordAddress(to), wordUint(amountAtomic)]),
    gas: opts.gas,
    wait: opts.wait,
  });
}

/** TestUSDC.transferMany: several Transfer logs in one tx. transfers = [{to, amount}]. Returns the tx hash. */
export async function transferMany(rpcUrl, token, from, transfers, opts = {}) {
  return sendTx(rpcUrl, { from, to: token, data: encodeTransferMany(transfers), gas: opts.gas, wait: opts.wait });
}

/** Plain ETH transfer (no calldata). Returns the tx hash. */
export async function sendEth(rpcUrl, from, to, wei, opts = {}) {
  return sendTx(rpcUrl, { from, to, value: wei, gas: opts.gas, wait: opts.wait });
}

/** token.balanceOf(who) at `block` (default latest), as a bigint. */
export async function balanceOf(rpcUrl, token, who, block = 'latest') {
  const out = await rpc(rpcUrl, 'eth_call', [
    { to: checkAddress(token, 'token'), data: encodeCall('balanceOf(address)', [wordAddress(who)]) },
    block,
  ]);
  return BigInt(out);
}
