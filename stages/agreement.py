"""Does torchgate's steady-state number agree with torch.utils.benchmark?

    python -m torchgate.agreement [--size 256] [--rounds 8] [--threads 0]

Each round is a fresh process that builds `matmul_relu` exactly as the bench worker does and
times it twice, back to back: with torchgate's measurement (`torchgate.measure.timing.measure`,
the bench defaults of conf/config.yaml) and with
`torch.utils.benchmark.Timer(...).blocked_autorange()`, alternating which goes first. Timing both in one process matters on a shared machine: its
speed moves by tens of percent from one second to the next, far more than the tools differ.
Prints both medians per round, and the median of the per-round ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from torchgate.core.names import pythonpath
from torchgate.core.numbers import median

ROUND = """
import json, sys, torch
from torch.utils.benchmark import Timer
from torchgate.core.numbers import median
from torchgate.measure.clocks import SyncClock
from torchgate.measure.timing import measure
from torchgate.workloads import matmul_relu
size, threads, seed, timer_first = (int(a) for a in sys.argv[1:5])
if threads:
    torch.set_num_threads(threads)
w = matmul_relu(device=torch.device("cpu"), dtype=torch.float32, compile=lambda f: f,
                seed=seed, size=size)

def ours():
    phases = measure(w.step, SyncClock(), samples=12, sample_target_s=0.02, warmup_s=0.2,
                     min_warmup_calls=3)
    return median(phases.steady_s)

def theirs():
    timer = Timer("step()", globals={"step": w.step}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=1.0).median

first, second = (theirs, ours) if timer_first else (ours, theirs)
a, b = first(), second()
print(json.dumps({"torchgate_s": b if timer_first else a, "timer_s": a if timer_first else b}))
"""


def one_round(size: int, threads: int, seed: int, timer_first: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    out = subprocess.run([sys.executable, "-c", ROUND, str(size), str(threads), str(seed),
                          str(int(timer_first))], capture_output=True, text=True, check=True,
                         timeout=300, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m torchgate.agreement", description=__doc__)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    ratios, ours, theirs = [], [], []
    for r in range(args.rounds):
        got = one_round(args.size, args.threads, seed=r, timer_first=bool(r % 2))
        ours.append(got["torchgate_s"])
        theirs.append(got["timer_s"])
        ratios.append(ours[-1] / theirs[-1])
        print(f"round {r + 1}: torchgate {ours[-1] * 1e6:.1f} µs, "
              f"Timer.blocked_autorange {theirs[-1] * 1e6:.1f} µs ({(ratios[-1] - 1) * 100:+.1f} %)")
    print(f"matmul_relu {args.size}x{args.size} fp32 CPU, {args.rounds} processes: torchgate "
          f"{median(ours) * 1e6:.1f} µs, Timer {median(theirs) * 1e6:.1f} µs; "
          f"median per-process difference {(median(ratios) - 1) * 100:+.1f} %")


if __name__ == "__main__":
    main()
