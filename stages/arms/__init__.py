"""The arms room: which arms a run measures, and the venvs and checkouts they run in. Used by
the launching side, never by a worker process.

Arms: the baseline measured again, side by side
-----------------------------------------------

A committed baseline was measured at another time, and a shared machine drifts: on a 2-core VM
one workload's process medians spanned 1.8–7.2 ms within two minutes, and a recorded-baseline
comparison of a 1.6 ms workload had a minimum detectable effect of 50–134 %, missing a 10 %
slowdown. Measured side by side instead, both arms see the same machine at the same moment.

Which arms (`plan.py`; the reason is the first line of every report):

- `candidate.python`, `candidate.pip`, `candidate.rev`: this environment and working tree, and
  the candidate; always (a what-if).
- `baseline.measure: auto` (default): this run, and the baseline rebuilt, when its packages
  that matter (env.json: torch's dependency closure, the distributions of what a worker
  imports; an older env.json that lists every distribution, on the names that matter now) or
  its workload code differ from this run's and it can be rebuilt; this run alone, against the
  recorded numbers, when nothing differs, there is no baseline yet, or it cannot be rebuilt
  (the reason is printed).
- `baseline.measure: rebuild`: this run, and the baseline rebuilt; always, or the stage stops
  with the reason.
- `baseline.measure: recorded`: this run alone, against the recorded numbers; always.

What comes from the other revision (`checkout.py`): `stages/workloads/` (the built-in
workloads and yours), any other module of the project that a workload's `_target_` names, and
the `workload` section of that revision's `params.yaml`. Everything else is this run's: the
harness that measures (`stages/` outside `workloads/`), the devices, precisions, modes and
bench settings, so that both arms are measured the same way. A worker of the other arm imports
torchgate from this harness and the workloads from a read-only checkout of the revision
(`git archive`, cached per commit).

The other environment (`venv.py`, `cache.py`) is rebuilt from the package set that
`reports/<machine>/env/packages.json` records (every installed distribution with its version and
local label, e.g. `torch 2.13.0+cpu`; those installed from a path or editable are left out;
without that file, what env.json lists), pinned exactly
and installed without dependency resolution, then the candidate's `candidate.pip` overrides
with theirs. It is built with uv (a dependency of torchgate; `arms.installer=pip` for venv +
pip), copying files rather than hardlinking them from uv's cache (a hardlinked torch read
60 MiB more resident memory on import), carrying pip's index settings over (`pip config list`:
index URLs, find-links, constraints; uv reads none of them), into a cache shared by every
project (`~/.cache/torchgate/venvs/<hash of the spec and platform>`, or `arms.cache_dir`),
built in place by one run at a time (another run wanting it waits, then reuses it), complete
only once its marker is written (a killed build's folder is removed and built again), checked
before each use (the user's own, the spec it carries, its python runs), and evicted least
recently used beyond `arms.cache_max_gb` (cache.py). What comes out is checked: torch must
be the recorded build, local label included, and a rebuilt baseline must hold every recorded
version, or the stage stops (with `baseline.measure: auto`, the comparison falls back to the
recorded numbers and says why): an A/B of two different builds reported as "the baseline"
would be a silent lie. Another Python minor version is taken from `pythonX.Y` on `PATH`.

Lock-step. Each round runs one worker process per arm, taking turns one phase or sample at a
time (A's compile, B's compile, A's first steady sample, B's first, ...; who goes first
alternates from round to round). The pair is the unit of replication: each round gives one log
ratio per metric, tested with a paired t-test (trimmed from 8 pairs on, 12 pinned:
judge/stats.py), so a machine whose speed wanders cancels out. Both arms run on the same cores, drawn at random per
pair (`bench.pin_pairs`, launch.local.pair_cores): a core slowed for a while then slows both.
Numerics run in both arms too (one after the other: they are not timed); with a rebuilt
baseline they are compared with the recorded baseline's outputs, as always, and also with the
rebuilt arm's (rows of the stage `numerics vs rebuilt`). Both processes of a pair are alive at
once, so the device must hold both workloads' memory.

What it costs and what it finds, measured on a shared 2-core VM, torch 2.13.0+cpu:

- A pull request that makes a user's 20-layer matmul + tanh block (1.3 ms a step) do 10 % more
  work, the merge base measured again beside it (`baseline.rev=main`, one cell, three
  workloads, eager): REGRESSED in 10 of 10 runs, estimates +8.5 to +11.2 % (median +9.8 %; the
  same change timed within one process, batches alternating: +9.8 %), minimum detectable
  effect 5.4–6.9 %; the two unchanged workloads gave no REGRESSED verdict in any run. About
  105 s a run, adaptive sampling to 8 pairs included. The same workload compared with a
  recorded baseline instead had a minimum detectable effect of 50–134 %.
- Before an upgrade, `dvc exp run -S 'candidate.pip=["torch==2.14.1"]'` on the default `cpu`
  matrix: the candidate venv (103 pinned packages plus torch 2.14.1 and its dependencies,
  5.5 GB) was built in 21.6 s with uv (70 s with venv + pip) and reused by the next stages and
  runs.
- Lock-step has no bias worth correcting here (8 pairs each): a matmul doing +11.1 % more work
  (timed within one process) read +11.5 % in lock-step between two interpreters and +11.5 to
  +11.7 % within one; chains doing +9.8 % and +10.4 % read +10.3 % and +10.7 %; the
  pair-to-pair spread of the log ratio was about 1 %. Untimed "settling" calls after each turn
  multiplied that spread by 3 to 11 and pulled the estimate down (+9.3 %, +9.7 %), and
  `OMP_WAIT_POLICY=PASSIVE` biased it low (+6.0 % for +11.1 %), so neither is used.

On a Ray cluster a rebuilt baseline or a `candidate.pip` venv is built on each node that runs
its units, from the same spec (with the node's own index settings), and cached there
(`~/.cache/torchgate`, `$TORCHGATE_CACHE` or `arms.cache_dir`); the other revision's workload
code is sent along and unpacked into the node's cache. A `candidate.python` must exist at that
path on the nodes.
"""
