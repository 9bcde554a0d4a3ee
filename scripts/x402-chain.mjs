// The EIP-3009 test USDC (tests/fixtures/x402/TestUSDC3009.json) on a local
// anvil started by scripts/chain.mjs: the token x402's "exact" scheme settles
// through, placed at Base's USDC address so that payers sign the real Base
// domain ("USD Coin", "2", chain 8453, 0x8335…2913). Plus what x402 tests read
// back from the chain, and a front-run (anyone may submit a signed
// authorization; the money still goes where it was signed to).
//
//   import { startAnvil, BASE_USDC } from './chain.mjs';
//   import { placeToken3009At, mint, authorizationState } from './x402-chain.mjs';
//   const chain = await startAnvil({ chainId: 8453 });
//   const usdc = await placeToken3009At(chain.rpcUrl, chain.accounts[0]);
//   await mint(chain.rpcUrl, usdc, chain.accounts[0], payer, 10_000_000n);
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeEventLog, decodeFunctionResult, encodeEventTopics, encodeFunctionData, getAddress, parseSignature } from 'viem';
import { BASE_USDC, balanceOf, mint, rpc, sendTx, waitForReceipt } from './chain.mjs';

// The generic ERC-20 helpers work unchanged on this token (same selectors).
export { BASE_USDC, balanceOf, mint };

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The compiled token: {abi, bytecode, deployedBytecode, solc, source_sha256}. */
export const TOKEN3009_ARTIFACT_PATH = join(ROOT, 'tests', 'fixtures', 'x402', 'TestUSDC3009.json');
/** The EIP-712 domain the token signs under (Base USDC's real one). */
export const TOKEN3009_DOMAIN = Object.freeze({ name: 'USD Coin', version: '2' });

let artifact;
/** Loads TestUSDC3009.json (cached). */
export function loadToken3009() {
  artifact ??= JSON.parse(readFileSync(TOKEN3009_ARTIFACT_PATH, 'utf8'));
  return artifact;
}
const abi = () => loadToken3009().abi;

async function call(rpcUrl, token, functionName, args = []) {
  const data = encodeFunctionData({ abi: abi(), functionName, args });
  const out = await rpc(rpcUrl, 'eth_call', [{ to: token, data }, 'latest']);
  return decodeFunctionResult({ abi: abi(), functionName, data: out });
}

/**
 * Puts the token's runtime code at `address` (default BASE_USDC) and checks
 * its EIP-712 domain there. The EIP-712 name/version are immutables, which
 * solc's deployedBytecode leaves as zeros: so the token is deployed once from
 * `from` (a dev account) and the code as deployed is copied with
 * anvil_setCode. Storage at `address` starts empty (no balances); the domain
 * separator is recomputed for the new address. Returns `address`.
 */
export async function placeToken3009At(rpcUrl, from, address = BASE_USDC) {
  const hash = await sendTx(rpcUrl, { from, data: loadToken3009().bytecode });
  const receipt = await waitForReceipt(rpcUrl, hash);
  if (receipt.status !== '0x1' || !receipt.contractAddress) {
    throw new Error(`TestUSDC3009 deployment failed: ${JSON.stringify(receipt)}`);
  }
  const code = await rpc(rpcUrl, 'eth_getCode', [receipt.contractAddress, 'latest']);
  await rpc(rpcUrl, 'anvil_setCode', [address, code]);
  const chainId = Number(await rpc(rpcUrl, 'eth_chainId', []));
  const domain = await eip712Domain(rpcUrl, address);
  const want = { ...TOKEN3009_DOMAIN, chainId, verifyingContract: getAddress(address) };
  for (const [k, v] of Object.entries(want)) {
    if (domain[k] !== v) throw new Error(`TestUSDC3009 at ${address}: EIP-712 ${k} is ${domain[k]}, expected ${v}`);
  }
  return address;
}

/** The token's ERC-5267 eip712Domain() at `token`: {name, version, chainId, verifyingContract}. */
export async function eip712Domain(rpcUrl, token) {
  const [, name, version, chainId, verifyingContract] = await call(rpcUrl, token, 'eip712Domain');
  return { name, version, chainId: Number(chainId), verifyingContract: getAddress(verifyingContract) };
}

/** authorizationState(authorizer, nonce): true once the EIP-3009 nonce was used (or cancelled). */
export async function authorizationState(rpcUrl, token, authorizer, nonce) {
  return call(rpcUrl, token, 'authorizationState', [authorizer, nonce]);
}

/**
 * The token's AuthorizationUsed(authorizer, nonce) logs for this authorizer
 * and nonce (both indexed), as {txHash, blockNumber, logIndex}. This is how a
 * server finds a settlement it did not see (front-run, lying facilitator).
 */
export async function authorizationUsedLogs(rpcUrl, token, authorizer, nonce) {
  const topics = encodeEventTopics({ abi: abi(), eventName: 'AuthorizationUsed', args: { authorizer, nonce } });
  const logs = await rpc(rpcUrl, 'eth_getLogs', [{ address: token, fromBlock: '0x0', toBlock: 'latest', topics }]);
  return logs.map((l) => {
    decodeEventLog({ abi: abi(), data: l.data, topics: l.topics }); // throws if it is not that event
    return { txHash: l.transactionHash, blockNumber: Number(l.blockNumber), logIndex: Number(l.logIndex) };
  });
}

/**
 * Submits transferWithAuthorization(authorization…, v, r, s) from `sender`
 * (any unlocked dev account, e.g. a thief holding a captured payment header),
 * i.e. settles the payment without its facilitator. `authorization` is the
 * x402 payload's {from, to, value, validAfter, validBefore, nonce} (decimal
 * strings as on the wire), `signature` its 65-byte hex signature. Waits for
 * the receipt and returns it (throws if the call would revert).
 */
export async function submitTransferWithAuthorization(rpcUrl, token, sender, authorization, signature) {
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  const { r, s, v, yParity } = parseSignature(signature);
  const data = encodeFunctionData({
    abi: abi(),
    functionName: 'transferWithAuthorization',
    args: [from, to, BigInt(value), BigInt(validAfter), BigInt(validBefore), nonce, Number(v ?? 27n + BigInt(yParity)), r, s],
  });
  const hash = await sendTx(rpcUrl, { from: sender, to: token, data });
  return waitForReceipt(rpcUrl, hash);
}
