"""Runs a job of torchgate's GitHub workflows on this machine, step by step, as a runner
would: the `if:` conditions and `${{ }}` expressions (the part of GitHub's expression language
the workflows use), env at workflow, job and step level, the files behind GITHUB_OUTPUT,
GITHUB_ENV, GITHUB_PATH and GITHUB_STEP_SUMMARY, step outcomes and `continue-on-error`, and
`run:` steps in bash with the job's default shell. The actions the workflows use are stood in
for: checkout clones a local origin, setup-python and cache do nothing, upload-artifact and
download-artifact keep a folder per artifact and run. An expression or an action it does not
know is an error, not a guess."""
from __future__ import annotations

import fnmatch
import hashlib
import json
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

TOKEN = re.compile(r"('(?:[^']|'')*')|(\d+(?:\.\d+)?)|([A-Za-z_][\w-]*)"
                   r"|(==|!=|&&|\|\||[!()\[\].,*])")
STATUS = re.compile(r"\b(success|failure|cancelled|always)\s*\(")
TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class Filtered(list):
    """The result of `.*`: a later property applies to each element."""


def truthy(value) -> bool:
    return value not in (None, False, 0, "") and value == value


def text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def equal(a, b) -> bool:
    """GitHub's loose equality: strings ignore case; other types meet as numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if type(a) is type(b):
        return a == b

    def number(v):
        try:
            return float(0 if v is None else v)
        except ValueError:
            return float("nan")
    return number(a) == number(b)


class Expression:
    """One expression, parsed as it is evaluated (recursive descent)."""

    def __init__(self, source: str, contexts: dict, functions: dict):
        self.tokens, at = [], 0
        while at < len(source):
            if source[at].isspace():
                at += 1
                continue
            match = TOKEN.match(source, at)
            if not match:
                raise ValueError(f"cannot read {source[at:]!r} in {source!r}")
            self.tokens.append(match.group(match.lastindex))
            at = match.end()
        self.pos, self.contexts, self.functions, self.source = 0, contexts, functions, source

    def value(self):
        result = self.either()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.pos]!r} in {self.source!r}")
        return result

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected=None):
        token = self.peek()
        if expected is not None and token != expected:
            raise ValueError(f"expected {expected!r}, got {token!r} in {self.source!r}")
        self.pos += 1
        return token

    def either(self):
        left = self.both()
        while self.peek() == "||":
            self.take()
            right = self.both()
            left = left if truthy(left) else right
        return left

    def both(self):
        left = self.compare()
        while self.peek() == "&&":
            self.take()
            right = self.compare()
            left = right if truthy(left) else left
        return left

    def compare(self):
        left = self.unary()
        if self.peek() in ("==", "!="):
            operator = self.take()
            same = equal(left, self.unary())
            return same if operator == "==" else not same
        return left

    def unary(self):
        if self.peek() == "!":
            self.take()
            return not truthy(self.unary())
        return self.postfix()

    def postfix(self):
        value = self.primary()
        while self.peek() in (".", "["):
            if self.take() == ".":
                name = self.take()
                value = Filtered(value if isinstance(value, list) else []) if name == "*" \
                    else self.member(value, name)
            else:
                key = self.either()
                self.take("]")
                value = self.member(value, key)
        return value

    @staticmethod
    def member(value, name):
        if isinstance(value, Filtered):
            return Filtered(v.get(name) for v in value if isinstance(v, dict) and name in v)
        return value.get(name) if isinstance(value, dict) else None

    def primary(self):
        token = self.take()
        if token == "(":
            value = self.either()
            self.take(")")
            return value
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        if token[0].isdigit():
            return float(token)
        if token in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[token]
        if self.peek() == "(":
            self.take()
            args = []
            while self.peek() != ")":
                args.append(self.either())
                if self.peek() == ",":
                    self.take()
            self.take(")")
            if token not in self.functions:
                raise ValueError(f"unknown function {token}() in {self.source!r}")
            return self.functions[token](*args)
        if token not in self.contexts:
            raise ValueError(f"unknown context {token!r} in {self.source!r}")
        return self.contexts[token]


def evaluate(source: str, contexts: dict, functions: dict):
    return Expression(source, contexts, functions).value()


def expand(value, contexts: dict, functions: dict):
    """A workflow value with its `${{ }}` filled in (strings; mappings and lists throughout)."""
    if isinstance(value, dict):
        return {k: expand(v, contexts, functions) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, contexts, functions) for v in value]
    if not isinstance(value, str):
        return value
    return TEMPLATE.sub(lambda m: text(evaluate(m.group(1), contexts, functions)), value)


def condition(source, contexts: dict, functions: dict) -> bool:
    """An `if:`: with no status function in it, success() && (it)."""
    if source is None:
        source = "success()"
    source = str(source).strip()
    whole = TEMPLATE.fullmatch(source)
    source = whole.group(1) if whole else source
    if not STATUS.search(source):
        source = f"success() && ({source})"
    return truthy(evaluate(source, contexts, functions))


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))      # YAML 1.1 reads a bare `on` as true
    return data


def read_pairs(path: Path) -> dict:
    """GITHUB_OUTPUT and GITHUB_ENV, as name=value lines (no step here writes a multi-line
    value, GitHub's name<<DELIMITER form)."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@dataclass
class Run:
    """One workflow run: its id, event, artifacts and the jobs it ran."""
    id: int
    github: dict
    folder: Path
    jobs: dict = field(default_factory=dict)

    @property
    def artifacts(self) -> Path:
        return self.folder / "artifacts"


@dataclass
class Step:
    name: str
    outcome: str
    conclusion: str
    outputs: dict
    output: str = ""
    uses: str = ""
    with_: dict = field(default_factory=dict)


@dataclass
class Job:
    result: str
    steps: list[Step]
    summary: str
    workspace: Path


class Runner:
    """Runs jobs against `origin` (a git repository a checkout clones), with `env` under
    every step (PATH included: put stand-in commands first) and earlier runs in `runs`, where
    download-artifact finds another run's artifacts by its id."""

    def __init__(self, origin: Path, folder: Path, env: dict[str, str],
                 variables: dict[str, str] | None = None):
        self.origin, self.folder, self.env = origin, folder, env
        self.vars = variables if variables is not None else {}    # the repository's `vars`
        self.runs: dict[int, Run] = {}

    def start(self, github: dict) -> Run:
        run_id = 1000 + len(self.runs)
        run = Run(run_id, {"run_id": run_id, "server_url": "https://github.com", **github},
                  self.folder / f"run-{run_id}")
        run.artifacts.mkdir(parents=True)
        self.runs[run_id] = run
        return run

    def job(self, run: Run, workflow: dict, name: str, secrets: dict | None = None) -> Job:
        """The job, or each job of its `strategy.matrix` (one list-valued key), one after
        another: its result failure where any failed (run.jobs[name]; each as name-i too)."""
        spec = workflow["jobs"][name]
        needs = spec.get("needs", [])
        needs = {n: {"result": run.jobs[n].result, "outputs": {}}
                 for n in ([needs] if isinstance(needs, str) else needs)}
        contexts = {"github": run.github, "env": {}, "needs": needs, "steps": {},
                    "secrets": secrets or {}, "vars": self.vars, "inputs": {}, "matrix": {},
                    "strategy": {}, "runner": {}}
        failed = any(n["result"] not in ("success", "skipped") for n in needs.values())
        functions = self.functions(lambda: failed, Path("."))
        if not condition(spec.get("if"), contexts, functions):
            run.jobs[name] = Job("skipped", [], "", Path("."))
            return run.jobs[name]
        matrix = (spec.get("strategy") or {}).get("matrix")
        if matrix is None:
            run.jobs[name] = self.one(run, workflow, name, spec, contexts, name)
            return run.jobs[name]
        (key, values), = matrix.items()
        whole = TEMPLATE.fullmatch(values) if isinstance(values, str) else None
        values = evaluate(whole.group(1), contexts, functions) if whole else values
        jobs = [self.one(run, workflow, name, spec, {
            **contexts, "matrix": {key: value}, "strategy": {
                "job-index": i, "job-total": len(values),
                "fail-fast": spec["strategy"].get("fail-fast", True)}}, f"{name}-{i}")
            for i, value in enumerate(values)]
        for i, job in enumerate(jobs):
            run.jobs[f"{name}-{i}"] = job
        run.jobs[name] = Job("failure" if any(j.result == "failure" for j in jobs)
                             else "success", [s for j in jobs for s in j.steps],
                             "".join(j.summary for j in jobs), jobs[0].workspace)
        return run.jobs[name]

    def one(self, run: Run, workflow: dict, name: str, spec: dict, contexts: dict,
            folder: str) -> Job:
        env: dict = {}
        contexts = {**contexts, "env": env, "steps": {}}
        workspace = run.folder / folder / "workspace"
        temp = run.folder / folder / "temp"
        workspace.mkdir(parents=True)
        temp.mkdir()
        contexts["runner"] = {"os": "Linux", "arch": "X64", "temp": str(temp)}
        steps, paths, summary, state = [], [], [], {"failed": False}   # steps: their own
        functions = self.functions(lambda: state["failed"], workspace)
        for level in (workflow.get("env", {}), spec.get("env", {})):
            env.update({k: expand(v, contexts, functions) for k, v in level.items()})
        shell = (spec.get("defaults") or workflow.get("defaults") or {}).get("run", {}).get(
            "shell")
        for number, step in enumerate(spec["steps"]):
            record = self.step(run, step, number, contexts, functions, env, shell, workspace,
                               temp, paths, summary)
            steps.append(record)
            if step.get("id"):
                contexts["steps"][step["id"]] = {"outcome": record.outcome,
                                                 "conclusion": record.conclusion,
                                                 "outputs": record.outputs}
            state["failed"] |= record.conclusion == "failure"
        return Job("failure" if state["failed"] else "success", steps, "".join(summary),
                   workspace)

    def functions(self, failed, workspace: Path) -> dict:
        def hash_files(*patterns):
            found = sorted(p for p in workspace.rglob("*") if p.is_file() and any(
                fnmatch.fnmatch(str(p.relative_to(workspace)), pat) for pat in patterns))
            if not found:
                return ""
            return hashlib.sha256(b"".join(hashlib.sha256(p.read_bytes()).digest()
                                           for p in found)).hexdigest()
        return {"success": lambda: not failed(), "failure": lambda: failed(),
                "cancelled": lambda: False, "always": lambda: True,
                "contains": lambda a, b: (any(equal(x, b) for x in a) if isinstance(a, list)
                                          else text(b).casefold() in text(a).casefold()),
                "startsWith": lambda a, b: text(a).casefold().startswith(text(b).casefold()),
                "format": lambda f, *a: re.sub(r"\{(\d+)\}", lambda m: text(a[int(m[1])]), f),
                "hashFiles": hash_files, "fromJSON": lambda value: json.loads(text(value))}

    def step(self, run, step, number, contexts, functions, env, shell, workspace, temp,
             paths, summary) -> Step:
        name = step.get("name") or step.get("uses") or step["run"].splitlines()[0]
        if not condition(step.get("if"), contexts, functions):
            return Step(name, "skipped", "skipped", {}, uses=step.get("uses", ""))
        step_env = dict(env)
        contexts = {**contexts, "env": step_env}
        step_env.update({k: expand(v, contexts, functions)
                         for k, v in step.get("env", {}).items()})
        files = {n: temp / f"{n.lower()}-{number}" for n in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for path in files.values():
            path.touch()
        github = run.github
        process_env = {**self.env, **{k: text(v) for k, v in step_env.items()},
                       **{k: str(v) for k, v in files.items()},
                       "CI": "true", "GITHUB_ACTIONS": "true", "RUNNER_OS": "Linux",
                       "RUNNER_TEMP": str(temp), "GITHUB_WORKSPACE": str(workspace),
                       "GITHUB_REPOSITORY": github["repository"],
                       "GITHUB_EVENT_NAME": github["event_name"], "GITHUB_SHA": github["sha"],
                       "GITHUB_REF": github["ref"], "GITHUB_RUN_ID": str(run.id)}
        process_env["PATH"] = ":".join([*paths, self.env["PATH"]])
        uses, with_ = step.get("uses", ""), expand(step.get("with", {}), contexts, functions)
        if uses:
            ok, output, outputs = self.action(run, uses, with_, workspace)
        else:
            script = temp / f"step-{number}.sh"
            script.write_text(expand(step["run"], contexts, functions))
            command = (["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
                       if shell == "bash" else ["bash", "-e", str(script)])
            done = subprocess.run(command, cwd=workspace, env=process_env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            ok, output, outputs = done.returncode == 0, done.stdout, {}
        outputs.update(read_pairs(files["GITHUB_OUTPUT"]))
        env.update(read_pairs(files["GITHUB_ENV"]))
        paths[:0] = [p for p in files["GITHUB_PATH"].read_text().splitlines() if p][::-1]
        summary.append(files["GITHUB_STEP_SUMMARY"].read_text())
        outcome = "success" if ok else "failure"
        conclusion = "success" if ok or step.get("continue-on-error") else "failure"
        return Step(name, outcome, conclusion, outputs, output, uses, with_)

    def action(self, run: Run, uses: str, with_: dict, workspace: Path):
        """(succeeded, what it printed, its outputs) of a stood-in action."""
        action = uses.split("@")[0]
        if action == "actions/checkout":
            ref = with_.get("ref") or run.github["sha"]
            git = ["git", "-C", str(workspace)]
            out = subprocess.run(["git", "clone", "-q", str(self.origin), str(workspace)],
                                 capture_output=True, text=True)
            if ref.startswith("refs/heads/"):
                branch = ref.removeprefix("refs/heads/")
                step = [*git, "checkout", "-q", "-B", branch, f"origin/{branch}"]
            elif re.fullmatch(r"[0-9a-f]{40}", ref):
                step = [*git, "checkout", "-q", "--detach", ref]
            else:
                step = [*git, "fetch", "-q", "origin", ref]
                out = subprocess.run(step, capture_output=True, text=True)
                step = [*git, "checkout", "-q", "--detach", "FETCH_HEAD"]
            out = out if out.returncode else subprocess.run(step, capture_output=True, text=True)
            return out.returncode == 0, out.stdout + out.stderr, {}
        if action == "actions/setup-python":
            return True, "", {"python-version": platform.python_version()}
        if action in ("actions/cache", "actions/cache/restore", "actions/cache/save"):
            return True, f"cache key {with_.get('key')}", {"cache-hit": "false"}
        if action == "actions/upload-artifact":
            source, target = workspace / with_["path"], run.artifacts / with_["name"]
            if target.exists():
                return False, f"an artifact named {with_['name']} exists already", {}
            if not source.exists():
                return with_.get("if-no-files-found", "warn") != "error", "no files", {}
            shutil.copytree(source, target) if source.is_dir() else (
                target.mkdir(), shutil.copy(source, target))
            return True, "", {}
        if action == "actions/download-artifact" and "pattern" in with_:
            # Each artifact that matches into a folder of its name (merge-multiple: false).
            found = sorted(a for a in run.artifacts.iterdir()
                           if fnmatch.fnmatch(a.name, with_["pattern"]))
            for artifact in found:
                shutil.copytree(artifact, workspace / with_.get("path", ".") / artifact.name)
            return bool(found), f"{len(found)} artifact(s)", {}
        if action == "actions/download-artifact":
            source_run = self.runs[int(with_.get("run-id") or run.id)]
            source = source_run.artifacts / with_["name"]
            if not source.is_dir():
                return False, f"artifact {with_['name']} not found", {}
            shutil.copytree(source, workspace / with_.get("path", "."), dirs_exist_ok=True)
            return True, "", {}
        raise ValueError(f"no stand-in for the action {uses}")
