#!/usr/bin/env node
// A local x402 facilitator for tests and `npm start`: the official
// @x402/core x402Facilitator with @x402/evm's "exact" scheme (v2 for
// eip155:<chainId>, v1 for the chain's legacy name, e.g. `base` for 8453),
// settling through a viem wallet client on a local anvil with one of its
// dev keys. Serves the facilitator API (POST /verify, POST /settle, GET
// /supported) on 127.0.0.1, plus fault modes a server under test must
// survive, switched in-process (setMode) or over HTTP (POST /_fixture/mode).
//
//   import { startFacilitator } from './x402-facilitator.mjs';
//   const f = await startFacilitator({ rpcUrl, privateKey });
//   f.setMode('hang_after_broadcast');   // the next /settle goes on chain, then never answers
//   f.settleCount();                     // /settle requests seen
//   await f.stop();
//
//   node scripts/x402-facilitator.mjs --rpc http://127.0.0.1:8545 --key 0x… [--port 4022] [--chain-id 8453]
//
// Modes (every one but `down` concerns /settle only; /verify always answers truly):
//   normal                  the library's answer
//   hang_after_broadcast    settle for real (the tx is mined), then never answer,
//                           or answer the real result after {delayMs}
//   fail_before_broadcast   the library's own failure answer, nothing sent to the chain:
//                           200 {success:false, errorReason, transaction:"", network, payer}
//                           (what its facilitator answers when settling fails before a broadcast)
//   error_500               HTTP 500 and nothing sent (a crash: the caller cannot tell
//                           whether anything was broadcast)
//   fake_success            {success:true} with a made-up tx hash, nothing sent
//   settlement_pending      broadcast, then the receipt wait fails: the library's
//                           own 2.27 answer {success:false, errorReason:
//                           "settlement_pending", transaction: <hash>, …}
//   down                    503 to everything but /_fixture/*; with {refuse:true}
//                           (in-process only) the port stops accepting connections
//
// requireCdpJwt: {keyId, publicKey} makes it act as Coinbase CDP's hosted
// facilitator does at its door: /verify and /settle (and /supported) need
// `Authorization: Bearer <jwt>` made with that CDP API key, else 401 before
// anything else (in every mode but `down`). The token is checked as
// npm @coinbase/cdp-sdk's generateJwt makes it (1.57.0,
// _cjs/auth/utils/jwt.js; see checkCdpJwt below): EdDSA over
// "header.payload" with the key's Ed25519 public key (32 bytes, hex or
// base64), header {alg:"EdDSA", kid:keyId, typ:"JWT", nonce}, claims
// {sub:keyId, iss:"cdp", uris:["<METHOD> <host:port><path>"] (or a single
// `uri` string, the older form), nbf <= now <= exp}, its nonce not seen before.
import { createPublicKey, randomBytes, verify as verifySignature } from 'node:crypto';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { x402Facilitator } from '@x402/core/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { createWalletClient, defineChain, http, publicActions } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

export const MODES = Object.freeze([
  'normal',
  'hang_after_broadcast',
  'fail_before_broadcast',
  'error_500',
  'fake_success',
  'settlement_pending',
  'down',
]);

/** The v1 network name of a chain id (`base` for 8453), or null if v1 has none. */
export function v1NetworkName(chainId) {
  const hit = Object.entries(EVM_NETWORK_CHAIN_ID_MAP).find(([, id]) => id === chainId);
  return hit ? hit[0] : null;
}

/**
 * Starts the facilitator. `chainId` defaults to the RPC's eth_chainId.
 * Returns {url, port, address (the settling account), networks, calls,
 * settleCount(), mode(), setMode(name, opts), stop()}. `calls` is a live log of
 * every facilitator request (not /_fixture/*): {method, path, body (parsed
 * JSON, else text), mode, status, response, auth}, status/response filled in once
 * answered (null while hanging); `auth` is null without requireCdpJwt, else
 * "ok" or why the token was refused (answered 401). Over HTTP: GET /_fixture/calls.
 * `requireCdpJwt: {keyId, publicKey}`: see the top of this file.
 */
export async function startFacilitator({ rpcUrl, chainId, privateKey, host = '127.0.0.1', port = 0, requireCdpJwt = null }) {
  if (!rpcUrl || !privateKey) throw new Error('startFacilitator needs rpcUrl and privateKey');
  const cdp = requireCdpJwt && cdpVerifier(requireCdpJwt);
  const account = privateKeyToAccount(privateKey);
  chainId ??= Number(await rpcChainId(rpcUrl));
  const chain = defineChain({
    id: chainId,
    name: `local-${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  // viem polls every 4 s by default: far too slow for a local chain that mines each tx at once.
  const client = createWalletClient({ account, chain, transport: http(rpcUrl), pollingInterval: 100 }).extend(
    publicActions,
  );

  let mode = { name: 'normal' };
  const evmSigner = toFacilitatorEvmSigner({
    address: account.address,
    getCode: (args) => client.getCode(args),
    readContract: (args) => client.readContract({ ...args, args: args.args || [] }),
    verifyTypedData: (args) => client.verifyTypedData(args),
    writeContract: (args) => client.writeContract({ ...args, args: args.args || [] }),
    sendTransaction: (args) => client.sendTransaction(args),
    // settlement_pending: the tx is already broadcast when this runs; failing the
    // wait makes the library itself produce its settlement_pending answer.
    waitForTransactionReceipt: async (args) => {
      if (mode.name === 'settlement_pending') {
        throw new Error('x402 fixture: receipt wait abandoned (settlement_pending mode)');
      }
      return client.waitForTransactionReceipt(args);
    },
  });

  const network = `eip155:${chainId}`;
  const v1Name = v1NetworkName(chainId);
  const facilitator = new x402Facilitator().register(network, new ExactEvmScheme(evmSigner));
  if (v1Name) facilitator.registerV1(v1Name, new ExactEvmSchemeV1(evmSigner));

  const calls = [];
  let boundPort = port; // the real one once listening; `down` {refuse} reopens on it
  const server = createServer((req, res) => {
    handle(req, res).catch((e) => {
      if (!res.headersSent) send(res, 500, { error: `x402 fixture: ${e.message}` });
    });
  });

  async function handle(req, res) {
    const path = new URL(req.url, 'http://x').pathname;
    const text = await readBody(req);
    let body = text;
    try { body = text ? JSON.parse(text) : null; } catch { /* keep the text */ }

    // The control API: answered in every mode, and not logged in `calls`.
    if (path === '/_fixture/mode' && req.method === 'POST') {
      const { mode: name, ...opts } = (body && typeof body === 'object' && body) || {};
      // Over HTTP nothing could switch a closed listener back on.
      if (opts.refuse) return send(res, 400, { error: 'refuse is for setMode() in-process only' });
      try {
        await setMode(name, opts);
      } catch (e) {
        return send(res, 400, { error: e.message });
      }
      return send(res, 200, { mode: name });
    }
    if (path === '/_fixture/calls' && req.method === 'GET') return send(res, 200, { calls });

    const entry = { method: req.method, path, body, mode: mode.name, status: null, response: null, auth: null };
    calls.push(entry);
    const answer = (status, json) => {
      entry.status = status;
      entry.response = json;
      send(res, status, json);
    };
    if (mode.name === 'down') return answer(503, { error: 'x402 fixture: facilitator down' });
    if (cdp) {
      // What the request was sent to, as the caller must have signed it.
      const why = cdp(req.headers.authorization, req.method, `${host}:${boundPort}${path}`);
      entry.auth = why ?? 'ok';
      if (why) return answer(401, { errorType: 'unauthorized', errorMessage: `x402 fixture: ${why}` });
    }

    if (path === '/supported' && req.method === 'GET') return answer(200, facilitator.getSupported());
    if ((path === '/verify' || path === '/settle') && req.method === 'POST') {
      const { paymentPayload, paymentRequirements } = (body && typeof body === 'object' && body) || {};
      if (!paymentPayload || !paymentRequirements) {
        return answer(400, { error: 'Missing paymentPayload or paymentRequirements' });
      }
      try {
        if (path === '/verify') return answer(200, await facilitator.verify(paymentPayload, paymentRequirements));
        return await settle(paymentPayload, paymentRequirements, answer);
      } catch (e) {
        // As the reference facilitator does: the library threw (e.g. unsupported network, RPC down).
        return answer(500, { error: e.message });
      }
    }
    return answer(404, { error: `no route ${req.method} ${path}` });
  }

  async function settle(paymentPayload, paymentRequirements, answer) {
    const m = mode;
    if (m.name === 'fail_before_broadcast') {
      return answer(200, {
        success: false,
        errorReason: 'unexpected_settle_error',
        transaction: '',
        network: paymentRequirements.network,
        payer: paymentPayload.payload?.authorization?.from,
      });
    }
    if (m.name === 'error_500') return answer(500, { error: 'x402 fixture: the facilitator failed' });
    if (m.name === 'fake_success') {
      return answer(200, {
        success: true,
        transaction: `0x${randomBytes(32).toString('hex')}`,
        network: paymentRequirements.network,
        payer: paymentPayload.payload?.authorization?.from,
      });
    }
    const result = await facilitator.settle(paymentPayload, paymentRequirements);
    if (m.name === 'hang_after_broadcast') {
      if (m.delayMs === undefined) return; // never answered; stop() drops the connection
      await sleep(m.delayMs);
    }
    return answer(200, result);
  }

  /**
   * Switches the fault mode (names in MODES). opts: {delayMs} for
   * hang_after_broadcast (answer late instead of never), {refuse: true} for
   * down (close the listener; any later mode reopens the same port).
   */
  async function setMode(name, opts = {}) {
    if (!MODES.includes(name)) throw new Error(`unknown mode ${JSON.stringify(name)} (one of ${MODES.join(', ')})`);
    if (opts.delayMs !== undefined && !(Number.isSafeInteger(opts.delayMs) && opts.delayMs >= 0)) {
      throw new Error(`bad delayMs ${opts.delayMs}`);
    }
    const refusing = !server.listening;
    mode = { name, ...opts };
    if (name === 'down' && opts.refuse && !refusing) {
      await new Promise((r) => { server.close(() => r()); server.closeAllConnections(); });
    } else if (refusing && !(name === 'down' && opts.refuse)) {
      await listen(server, boundPort, host);
    }
  }

  await listen(server, port, host);
  boundPort = server.address().port;
  const url = `http://${host}:${boundPort}`;

  return {
    url,
    port: boundPort,
    address: account.address,
    networks: v1Name ? [network, v1Name] : [network],
    calls,
    settleCount: () => calls.filter((c) => c.path === '/settle').length,
    mode: () => mode.name,
    setMode,
    stop: async () => {
      if (!server.listening) return;
      await new Promise((r) => { server.close(() => r()); server.closeAllConnections(); });
    },
  };
}

/**
 * The check of `requireCdpJwt: {keyId, publicKey}`: returns
 * (authorization, method, hostPath, nowSec = now) => null when the Bearer
 * token is good for that request, else why not. Nonces are remembered (a
 * token is good once).
 */
export function cdpVerifier({ keyId, publicKey, leewaySec = 5 }) {
  if (!keyId || !publicKey) throw new Error('requireCdpJwt needs keyId and publicKey');
  const raw = typeof publicKey === 'string'
    ? Buffer.from(publicKey, /^[0-9a-f]{64}$/i.test(publicKey) ? 'hex' : 'base64')
    : Buffer.from(publicKey);
  if (raw.length !== 32) throw new Error('requireCdpJwt.publicKey: not 32 bytes');
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
  const seen = new Set();
  return (authorization, method, hostPath, nowSec = Math.floor(Date.now() / 1000)) => {
    const m = /^Bearer ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(authorization ?? '');
    if (!m) return authorization ? 'the Authorization header is not a Bearer JWT' : 'no Authorization header';
    const [, h, p, s] = m;
    let header, claims;
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
      claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    } catch {
      return 'the JWT header or claims are not JSON';
    }
    if (header.alg !== 'EdDSA') return `alg ${JSON.stringify(header.alg)}, not EdDSA`;
    if (header.typ !== 'JWT') return `typ ${JSON.stringify(header.typ)}, not JWT`;
    if (header.kid !== keyId) return `kid ${JSON.stringify(header.kid)} is not the key's id`;
    if (typeof header.nonce !== 'string' || header.nonce.length < 16) return 'no nonce in the header';
    if (!verifySignature(null, Buffer.from(`${h}.${p}`), key, Buffer.from(s, 'base64url'))) {
      return 'the signature does not verify with the key';
    }
    if (claims.sub !== keyId) return `sub ${JSON.stringify(claims.sub)} is not the key's id`;
    if (claims.iss !== 'cdp') return `iss ${JSON.stringify(claims.iss)}, not cdp`;
    const want = `${method} ${hostPath}`;
    const bound = Array.isArray(claims.uris) ? claims.uris.includes(want) : claims.uri === want;
    if (!bound) return `the token is for ${JSON.stringify(claims.uris ?? claims.uri)}, not ${JSON.stringify(want)}`;
    if (!Number.isInteger(claims.nbf) || !Number.isInteger(claims.exp)) return 'nbf or exp missing';
    if (claims.nbf > nowSec + leewaySec) return `not valid before ${claims.nbf} (now ${nowSec})`;
    if (claims.exp < nowSec - leewaySec) return `expired at ${claims.exp} (now ${nowSec})`;
    if (claims.exp - claims.nbf > 300) return `valid for ${claims.exp - claims.nbf} s: too long`;
    if (seen.has(header.nonce)) return 'the nonce was used before';
    seen.add(header.nonce);
    return null;
  };
}

function listen(server, port, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function send(res, status, json) {
  const body = JSON.stringify(json);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

async function rpcChainId(rpcUrl) {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
  });
  const { result, error } = await res.json();
  if (error || !result) throw new Error(`eth_chainId at ${rpcUrl}: ${JSON.stringify(error)}`);
  return result;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      rpc: { type: 'string' },
      key: { type: 'string' },
      port: { type: 'string', default: '0' },
      'chain-id': { type: 'string' },
    },
  });
  if (!values.rpc || !values.key) {
    console.error('usage: node scripts/x402-facilitator.mjs --rpc URL --key 0x<private key> [--port N] [--chain-id N]');
    process.exit(2);
  }
  const f = await startFacilitator({
    rpcUrl: values.rpc,
    privateKey: values.key,
    port: Number(values.port),
    chainId: values['chain-id'] === undefined ? undefined : Number(values['chain-id']),
  });
  console.log(`x402 facilitator ${f.url} (networks ${f.networks.join(', ')}, settling from ${f.address})`);
  const bye = () => f.stop().then(() => process.exit(0));
  process.on('SIGINT', bye);
  process.on('SIGTERM', bye);
}
