// CPU time of a server's processes, for the write benches: on a machine
// shared with other work, flat-out writes are bounded by the share of the CPU
// the server gets, so what one accepted write costs in CPU is the figure that
// compares from run to run. Linux only (/proc); elsewhere every figure is
// `undefined` and the benches print none.
import { readFileSync, readdirSync, readlinkSync } from "node:fs";

const TICKS_PER_S = 100;

function stat(pid) {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8");
  return s.slice(s.lastIndexOf(")") + 2).split(" ");
}

const pids = () => readdirSync("/proc").filter((d) => /^\d+$/.test(d));

/** The process listening on loopback TCP `port`, if it can be found. */
export function listenerPid(port) {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[1]?.endsWith(`:${hex}`) && f[3] === "0A") inodes.add(`socket:[${f[9]}]`);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const d of pids()) {
    try {
      for (const fd of readdirSync(`/proc/${d}/fd`)) {
        if (inodes.has(readlinkSync(`/proc/${d}/fd/${fd}`))) return Number(d);
      }
    } catch {
      // A process that ended, or one we may not look into.
    }
  }
  return undefined;
}

/** User + system CPU (ms) of `root` and every process below it, so far. */
export function treeCpuMs(root) {
  if (!root) return undefined;
  const children = new Map();
  const ticks = new Map();
  try {
    readdirSync("/proc");
  } catch {
    return undefined;
  }
  for (const d of pids()) {
    try {
      const f = stat(d);
      const parent = Number(f[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(d)]);
      ticks.set(Number(d), Number(f[11]) + Number(f[12]));
    } catch {
      // Gone meanwhile.
    }
  }
  let total = 0;
  const queue = [root];
  while (queue.length) {
    const p = queue.pop();
    total += ticks.get(p) ?? 0;
    queue.push(...(children.get(p) ?? []));
  }
  return (total * 1000) / TICKS_PER_S;
}
