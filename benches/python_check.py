"""The Python package's costs, measured (run with the interpreter of a venv the
wheel is installed in; benches/README.md says how):

- import time: `python -c "import selfcap"` minus `python -c "pass"`, median of N;
- `selfcap.check()` of a capsule of close to 4096 canonical bytes (the free
  tier's worst case), per call, as a ratio to the floor of the benchmarks
  (SHA-256 of the same canonical bytes, in the same process);
- the same check through the installed `selfcap` command (`selfcap set FILE`:
  a process, the local check, the file saved), per invocation.

Prints one JSON object. Nothing here decides anything: it only times calls.
"""

import copy
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import selfcap

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "keep the release notes current and ship the package once the tests pass on every platform "
    "review each change with care then record what was learned for the next session of work "
).split()


def prose(n: int, seed: int) -> str:
    words = WORDS[seed % len(WORDS):] + WORDS[: seed % len(WORDS)]
    out = ""
    i = 0
    while len(out) < n:
        out += words[i % len(words)] + " "
        i += 1
    return out[:n].strip().ljust(n, "x")


def maximal_capsule(agent_id: str) -> dict:
    """The spec's example with 8 long objectives and a motto filling it to <= 4096 bytes."""
    base = json.loads((ROOT / "tests" / "vectors" / "spec_example_capsule.json").read_text())
    base["agent_id"] = agent_id
    for checkpoint in range(200, 0, -1):
        c = copy.deepcopy(base)
        c["objectives"] = [
            {
                "id": f"objective-{i}",
                "status": "in_progress",
                "priority": "high",
                "title": prose(120, i),
                "checkpoint": prose(checkpoint, i + 3),
            }
            for i in range(8)
        ]
        c["self_motto"] = ""
        if len(selfcap.canonicalize(c)) <= 4096:
            break
    for motto in range(160, -1, -1):
        c["self_motto"] = prose(motto, 1)
        if len(selfcap.canonicalize(c)) <= 4096:
            return c
    raise AssertionError("no capsule fits")


def per_call(fn, seconds: float = 2.0) -> float:
    """Median seconds per call over batches filling about `seconds`."""
    fn()
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t > 0.05:
            break
        n *= 2
    batches = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(batches) < 5:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t) / n)
    return statistics.median(batches)


def wall(cmd, runs: int, env=None) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    runs = int(os.environ.get("RUNS", "15"))
    with tempfile.TemporaryDirectory() as tmp:
        me = selfcap.Identity.create(home=tmp)
        capsule = maximal_capsule(me.agent_id)
        canonical = selfcap.canonicalize(capsule)
        assert selfcap.check(capsule) is None
        floor = per_call(lambda: hashlib.sha256(canonical).digest())
        check = per_call(lambda: selfcap.check(capsule))
        path = Path(tmp) / "capsule.json"
        path.write_text(json.dumps(capsule))
        command = str(Path(sys.executable).parent / "selfcap")
        env = {**os.environ, "SELFCAP_HOME": tmp}
        cli_set = wall([command, "set", str(path)], runs, env)
        cli_version = wall([command, "--version"], runs, env)
    python_bare = wall([sys.executable, "-c", "pass"], runs)
    python_import = wall([sys.executable, "-c", "import selfcap"], runs)
    wheel_dir = Path(selfcap.__file__).parent
    native = next(p for p in wheel_dir.iterdir() if p.name.startswith("_native"))
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "capsule_bytes": len(canonical),
                "native_module_bytes": native.stat().st_size,
                "import_ms": round((python_import - python_bare) * 1000, 1),
                "python_startup_ms": round(python_bare * 1000, 1),
                "floor_sha256_us": round(floor * 1e6, 1),
                "check_us": round(check * 1e6, 1),
                "check_x_floor": round(check / floor, 1),
                "cli_set_ms": round(cli_set * 1000, 1),
                "cli_version_ms": round(cli_version * 1000, 1),
                "cli_set_over_check": round(cli_set / check, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
