"""Which arms a run measures, and why.

One arm (this interpreter, this working tree) is compared with the baseline's recorded numbers.
Two arms are measured side by side, in lock-step pairs, when

- a candidate is asked for (`candidate.python`, `candidate.pip`, `candidate.rev`): the
  candidate against this environment and working tree;
- or the baseline can be measured again (`baseline.measure`: auto, rebuild): when this run's
  packages that matter (env.json: torch's closure, what the workers import) or workload code
  differ from the baseline's, the baseline arm is rebuilt from its revision (its workload
  modules and workload configuration) and its recorded package set (packages.json: every
  installed distribution), and measured beside this run. Two runs measured apart in time on a machine that drifts can
  rarely tell 10 % from noise; side by side they can.

What comes from the other revision: `stages/workloads/`, the project's other modules that a
workload `_target_` names, and the `workload` section of its params.yaml. Everything else (the
harness that measures, the devices, precisions, modes and bench settings) is this run's, so
that both arms are measured the same way.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from torchgate.arms import checkout, locks, venv
from torchgate.arms.cache import cache_root, tidy
from torchgate.core.baseline import git, load_baseline, load_current
from torchgate.core.config import Config, expand, parse_workloads
from torchgate.core.config.settings import WorkloadSpec
from torchgate.core.config.targets import module_paths
from torchgate.core.errors import UserError
from torchgate.core.records.dotted import changed
from torchgate.core.records.job import NOW_ARM, Arm
from torchgate.core.records.packages import PACKAGES, every_installed, that_matter
from torchgate.core.records.schema import EnvRecord
from torchgate.core.vocabulary import short


@dataclass(frozen=True)
class Plan:
    arms: tuple[Arm, ...]      # in the order of a round; the last is the one reported as "now"
    note: str                  # how timings are compared, and why: one line for the reports
    rebuilt: bool = False      # the first arm is the baseline, measured again
    unchanged: bool = False    # packages, workload code and environment the baseline's


def workload_paths(workloads: dict[str, WorkloadSpec], root: Path = Path(".")) -> list[str]:
    """The files that define the workloads: stages/workloads/ and the project's modules that
    a `_target_` names (an installed package is not the project's)."""
    paths = {"stages/workloads"}
    for spec in workloads.values():
        paths.update(p for p in module_paths(spec.target, root) if not p.startswith("stages/"))
    return sorted(paths)


def plan(cfg: Config, log: Callable[[str], None] = lambda line: None,
         root: Path = Path(".")) -> Plan:
    """With the Ray backend, a venv an arm needs is not built here but on each node that runs
    the arm (from `Arm.venv`, cached there). Either way, killed builds' litter goes first."""
    tidy(cache_root(cfg))
    if cfg.candidate.wanted:
        return _candidate(cfg, log, root)
    if cfg.baseline.measure == "recorded":
        try:     # said in the record: an unchanged run may join the mean of like runs
            unchanged = _rebuilt_baseline(cfg, log, root, build=False).unchanged
        except UserError:
            unchanged = False
        return Plan((NOW_ARM,), "Timings compare with the baseline's recorded numbers "
                            "(baseline.measure=recorded).", unchanged=unchanged)
    try:
        return _rebuilt_baseline(cfg, log, root)
    except UserError as exc:
        if cfg.baseline.measure == "rebuild":
            raise
        return Plan((NOW_ARM,), f"Timings compare with the baseline's recorded numbers: the "
                            f"baseline could not be measured again ({exc}).")


def _candidate(cfg: Config, log, root: Path) -> Plan:
    cache = cache_root(cfg)
    python, spec = cfg.candidate.python, None
    if cfg.candidate.pip:
        env_folder = root / cfg.reports / "env"
        here = load_current(env_folder / "env.json", EnvRecord)
        installed = here and every_installed(_read(env_folder / PACKAGES), here.env,
                                             (cfg.reports / "env" / PACKAGES).as_posix())
        if not installed:
            raise UserError("candidate.pip builds on this environment's package set, recorded by "
                            "the env stage; run `python -m torchgate.env` (or dvc repro) first")
        spec = venv.spec_from(installed, _python_version(here, "this run's"),
                              overrides=cfg.candidate.pip, installer=cfg.arms.installer)
        python = _materialise(cfg, spec, cache, log)
    code, rev, workloads = None, None, None
    if cfg.candidate.rev:
        rev = git.resolve_rev(cfg.candidate.rev, root, "candidate.rev")
        if rev is None:
            raise UserError("candidate.rev needs a commit; this repository has none yet")
        code, workloads = _checkout(cfg, rev, cache, log, root)
    what = ", ".join(filter(None, [f"`{python}`" if cfg.candidate.python else "",
                                   f"{' '.join(cfg.candidate.pip)} on this environment"
                                   if cfg.candidate.pip else "",
                                   f"the workloads at {short(rev)}" if rev else ""]))
    return Plan((Arm("baseline"), Arm("candidate", python, code, rev, workloads, spec)),
                f"Timings compare the candidate ({what}) with this environment and working tree, "
                "measured side by side in lock-step pairs.")


def _rebuilt_baseline(cfg: Config, log, root: Path, build: bool = True) -> Plan:
    """The baseline measured again beside this run, where its packages or workload code
    differ (or `baseline.measure` is rebuild); build False: only whether they differ."""
    commit = git.resolve_rev(cfg.baseline.rev, root)
    if commit is None:
        return Plan((NOW_ARM,), "No baseline yet: this run's numbers are recorded for the next.")
    env_path = cfg.reports / "env" / "env.json"
    base_env = load_baseline(commit, env_path, EnvRecord, root)
    if base_env is None:
        return Plan((NOW_ARM,), f"No baseline at {cfg.baseline.rev} yet: this run's numbers are "
                            "recorded for the next.")
    here = load_current(root / env_path, EnvRecord)
    if here is None:
        raise UserError("this run's environment is not recorded by the env stage; run "
                        "`python -m torchgate.env` (or dvc repro) first")
    # The packages that matter, each side's (an older baseline that lists every installed
    # distribution: on the names that matter now); a pip install beside them is no change.
    base_matter, now_matter = that_matter(base_env.env, here.env)
    if not base_matter:
        raise UserError("the baseline's env.json does not list its installed packages (it was "
                        "recorded by an older torchgate)")
    # Two revisions can be meant by "the baseline": the code its recorded numbers measured
    # (the commit that last wrote its reports: `rev` may hold newer code, committed before its
    # run) and the code a rebuilt arm runs, measured now (`baseline_code`).
    measured = git.commits_touching(commit, (cfg.reports / "bench").as_posix(), 1, root)
    recorded_at = measured[0] if measured else commit
    code_at = baseline_code(cfg, commit, recorded_at, root)
    env = _environments(cfg, code_at, base_env, base_matter, now_matter, root)
    packages_differ = bool(env.changes)
    paths = workload_paths(cfg.workloads, root)
    recorded_workloads = _with_this_runs_limits(_workloads_at(recorded_at, cfg, root), cfg)
    # The workloads both select: a selection that adds or drops one is no change of code (the
    # added one has no baseline, NEW; the dropped one is not run).
    recorded_differs = _code_differs(recorded_at, recorded_workloads, cfg, paths, root)
    base_workloads = (recorded_workloads if code_at == recorded_at else
                      _with_this_runs_limits(_workloads_at(code_at, cfg, root), cfg))
    code_differs = (recorded_differs if code_at == recorded_at else
                    _code_differs(code_at, base_workloads, cfg, paths, root))
    moved = environment_moved(base_env.env, here.env)
    unchanged = not (packages_differ or recorded_differs or moved)
    if not (packages_differ or recorded_differs) and cfg.baseline.measure == "auto":
        return Plan((NOW_ARM,), f"Timings compare with the baseline's recorded numbers: its "
                            f"packages and workload code are this run's ({short(recorded_at)})"
                    + (f"; its environment is not: {_listed(moved)} changed, which can move "
                       "a timing." if moved else "."), unchanged=unchanged)
    if not build:
        return Plan((NOW_ARM,), "", unchanged=unchanged)
    cache = cache_root(cfg)
    python, spec = None, None
    if packages_differ:
        spec = venv.spec_from(env.base, env.python, torch=env.base.get("torch"),
                              index=env.index, installer=cfg.arms.installer)
        python = _materialise(cfg, spec, cache, log)
    code = None
    if code_differs:
        code, _ = _checkout(cfg, code_at, cache, log, root)
    shown = ", ".join(env.changes[:3]) + (f" and {len(env.changes) - 3} more"
                                          if len(env.changes) > 3 else "")
    changed = (f"its packages ({shown}) and workload code differ from this run's"
               if packages_differ and code_differs
               else f"its packages differ from this run's ({shown})" if packages_differ
               else "its workload code differs from this run's" if code_differs
               else f"its workload code is this run's, its recorded numbers measured other "
                    f"code ({short(recorded_at)})" if recorded_differs
               else "its packages and workload code are this run's (baseline.measure=rebuild)")
    torch = env.base.get("torch") or (base_env.env.get("torch") or {}).get("version")
    baseline = (Arm("baseline", python, code, code_at, base_workloads, spec) if code_differs
                else Arm("baseline", python, venv=spec))   # the same workloads: this tree's
    return Plan((baseline, NOW_ARM),
                f"Timings compare with the baseline measured again beside this run, in "
                f"lock-step pairs: {changed}; the baseline arm runs "
                f"torch {torch}" + (f" and the workloads at {short(code_at)}" if code_differs
                                    else "") + "." + env.note, rebuilt=True)


def baseline_code(cfg: Config, commit: str, recorded_at: str, root: Path) -> str:
    """The revision whose workload code and configuration a rebuilt baseline arm runs:
    `baseline.code` where set (the hosted check: the pull request's base, while its reports
    come from the newest baseline that measured an ancestor of it); else `baseline.rev`
    itself (a merge base: its own code, whatever last wrote its reports), unless it is the
    commit checked out (HEAD, the default): then a change committed before its run is this
    run's change, and the baseline is the code its reports measured."""
    if cfg.baseline.code:
        return git.resolve_rev(cfg.baseline.code, root, "baseline.code")
    return recorded_at if commit == git.resolve_rev("HEAD", root) else commit


def _code_differs(commit: str, workloads: dict[str, WorkloadSpec], cfg: Config,
                  paths: list[str], root: Path) -> bool:
    """Whether the workloads at `commit` differ from this run's: their files, or the
    configuration of a workload both select."""
    both = workloads.keys() & cfg.workloads.keys()
    return (checkout.differs(commit, paths, root)
            or _specs(workloads, both) != _specs(cfg.workloads, both))


@dataclass(frozen=True)
class Environments:
    base: dict[str, str]       # the baseline arm's packages: its lock, else its recorded set
    python: str                # ... and its Python version
    changes: list[str]         # what differs from this run's, among the packages that matter
    note: str = ""             # " This environment differs from its lock: ...", or nothing
    index: str | None = None   # the baseline's lock's torch index, which its venv installs from


# Compared as packages (core.records.packages), not field by field.
_PACKAGE_FIELDS = ("packages", "distributions", "installed")


def environment_moved(base: dict, now: dict) -> list[str]:
    """The fields of the environment besides its packages that differ between the baseline's
    and this run's (dotted): a variable (TORCHINDUCTOR_MAX_AUTOTUNE), a backend flag, the
    driver, the kernel, the hardware. Any of them can move a timing, so a run that moved one
    is not unchanged, whatever its packages and code."""
    return [field for field, _, _ in changed(
        *({k: v for k, v in (env or {}).items() if k not in _PACKAGE_FIELDS}
          for env in (base, now)))]


def _listed(fields: list[str]) -> str:
    return ", ".join(fields[:4]) + (f" and {len(fields) - 4} more" if len(fields) > 4 else "")


def _environments(cfg: Config, commit: str, base_env: EnvRecord, base_matter: dict[str, str],
                  now: dict[str, str], root: Path) -> Environments:
    """Each arm's environment. Where the machine has a lock (conf/env/<machine>.txt) it is the
    lock at that arm's revision: a change that leaves the lock alone compares code only, in
    one interpreter; else the recorded package sets. Only the packages that matter (those
    env.json lists: torch's closure, what the workers import; `base_matter` and `now`)
    count as a difference."""
    machine = cfg.reports.name
    matter = {*base_matter, *now}
    locked_base = locks.read_at(commit, machine, root)
    if locked_base is None:
        # Built from every distribution the baseline had installed (packages.json): pinned
        # without dependency resolution, a venv needs the whole set, not the ones that matter.
        packages = (cfg.reports / "env" / PACKAGES).as_posix()
        installed = every_installed(git.read_file(commit, packages, root), base_env.env,
                                    f"the baseline's {packages}")
        return Environments(_without_harness(installed),
                            _python_version(base_env, "the baseline's"),
                            locks.changes(_without_harness(base_matter), _without_harness(now)))
    locked_now = locks.read(machine, root)
    this = locked_now.pins if locked_now is not None else _without_harness(now)
    changes = locks.changes(locked_base.pins, this, matter)
    python_now = locked_now.python if locked_now is not None else None
    if python_now and locks.minor(python_now) != locks.minor(locked_base.python):
        changes.insert(0, f"python {locked_base.python} -> {python_now}")
    note = ""
    if locked_now is not None:
        drift = locks.changes(locked_now.pins, _without_harness(now), matter)
        if drift:
            note = (f" This environment differs from its lock {locks.path_of(machine)} "
                    f"({', '.join(drift[:3])}{' ...' if len(drift) > 3 else ''}): install it "
                    "with `pip install -r` that file.")
    if locked_base.index != (locked_now.index if locked_now is not None else locked_base.index):
        changes.append(f"torch index {locked_base.index} -> {locked_now.index}")
    return Environments(locked_base.pins, locked_base.python, changes, note, locked_base.index)


def _materialise(cfg: Config, spec: venv.VenvSpec, cache: Path, log) -> str:
    """The venv's python: built here, or with the Ray backend, where each node will build it
    (this machine may not even be able to: another OS, no GPU build of torch)."""
    if cfg.launcher.backend == "local":
        return venv.materialise(spec, cache, log, cfg.arms.cache_max_gb)
    log(f"the venv ({len(spec.pins)} pinned packages) is built on each node that runs it")
    return str(venv.python_of(spec, cache))


def _checkout(cfg: Config, commit: str, cache: Path, log, root: Path):
    code = checkout.export(commit, cache, root)
    if not (code / "stages" / "workloads" / "__init__.py").is_file():
        raise UserError(f"the revision {short(commit)} keeps its workloads outside "
                        "stages/workloads/ (an older layout) and cannot be measured by this "
                        "harness")
    log(f"the workloads at {short(commit)} are in {code}")
    return str(code), _workloads_at(commit, cfg, root)


def _workloads_at(commit: str, cfg: Config, root: Path) -> dict[str, WorkloadSpec]:
    """The `workload` section of params.yaml as committed at `commit`, swept as this run
    sweeps (the sweep is a setting of the run, not of the workloads)."""
    text = git.read_file(commit, "params.yaml", root)
    if text is None:
        raise UserError(f"params.yaml is not committed at {short(commit)}")
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"params.yaml at {short(commit)} is not valid YAML "
                        f"({str(exc).splitlines()[0]})") from None
    return expand(parse_workloads(raw.get("workload") or {}), cfg.sweep, strict=False)


def _specs(workloads: dict[str, WorkloadSpec], names) -> dict:
    """What runs of the workloads `names`: target and arguments."""
    return {name: (w.target, w.kwargs) for name, w in workloads.items() if name in names}


def _with_this_runs_limits(workloads: dict[str, WorkloadSpec], cfg: Config
                           ) -> dict[str, WorkloadSpec]:
    """The baseline's workloads with this run's time limits (`_timeout_s_`): a setting of the
    run, as the sweep is, never a difference of code that an arm timed out under."""
    return {name: dataclasses.replace(w, timeout_s=cfg.workloads[name].timeout_s)
            if name in cfg.workloads else w for name, w in workloads.items()}


def _python_version(env: EnvRecord, whose: str) -> str:
    """The Python version an environment record names; UserError when it names none."""
    python = env.env.get("python")
    version = python.get("version") if isinstance(python, dict) else None
    if not isinstance(version, str) or not version:
        raise UserError(f"{whose} env.json lists its packages but not its Python version (no "
                        "python section): rerun the env stage there (`python -m torchgate.env`) "
                        "and commit reports/<machine>/env/env.json")
    return version


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _without_harness(packages: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in packages.items() if k not in venv.NOT_PINNED}


