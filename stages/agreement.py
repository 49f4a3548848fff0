"""Does torchgate's steady-state number agree with torch.utils.benchmark?

    python -m stages.agreement [--size 256] [--rounds 5] [--threads 0]

Alternates, round by round, a torchgate bench worker process (the real measurement path) and
a fresh process timing the same op and shape with
`torch.utils.benchmark.Timer(...).blocked_autorange()`, then prints both medians of the
per-process medians and their difference. Fresh processes on both sides: the spread between
processes is larger than either tool's within-process error.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from .launcher import run_worker

TIMER_SCRIPT = """
import json, sys, torch
from torch.utils.benchmark import Timer
size, threads, seed = (int(a) for a in sys.argv[1:4])
if threads:
    torch.set_num_threads(threads)
gen = torch.Generator().manual_seed(seed)
a = torch.randn(size, size, generator=gen)
b = torch.randn(size, size, generator=gen)
m = Timer("torch.relu(a @ b)", globals={"a": a, "b": b, "torch": torch},
          num_threads=torch.get_num_threads()).blocked_autorange(min_run_time=1.0)
print(json.dumps({"median_s": m.median}))
"""


def torchgate_median(size: int, threads: int, seed: int) -> float:
    job = {"kind": "bench", "seed": seed, "modes": ["eager"],
           "device": {"name": "cpu", "type": "cpu", "threads": threads},
           "precision": {"name": "fp32", "dtype": "float32", "matmul_precision": "highest"},
           "workload": {"name": "matmul_relu", "target": "stages.workloads.matmul_relu",
                        "kwargs": {"size": size}},
           "timing": {"samples": 50, "sample_target_s": 0.02, "warmup_s": 0.2,
                      "min_warmup_calls": 3}}
    result = run_worker(job, timeout_s=120)
    mode = result.get("modes", {}).get("eager", {})
    if mode.get("status") != "OK":
        raise SystemExit(f"torchgate worker failed: {result.get('error') or mode.get('error')}")
    return statistics.median(mode["steady_s"])


def timer_median(size: int, threads: int, seed: int) -> float:
    out = subprocess.run([sys.executable, "-c", TIMER_SCRIPT, str(size), str(threads), str(seed)],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])["median_s"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.agreement", description=__doc__)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    ours, theirs = [], []
    for r in range(args.rounds):
        ours.append(torchgate_median(args.size, args.threads, seed=r))
        theirs.append(timer_median(args.size, args.threads, seed=r))
        print(f"round {r + 1}: torchgate {ours[-1] * 1e6:.1f} µs, "
              f"Timer.blocked_autorange {theirs[-1] * 1e6:.1f} µs")
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"matmul_relu {args.size}x{args.size} fp32 CPU, {args.rounds} processes each: "
          f"torchgate {a * 1e6:.1f} µs, Timer {b * 1e6:.1f} µs, difference {(a / b - 1) * 100:+.1f} %")


if __name__ == "__main__":
    main()
