"""CI (.ci/run) installs as the README's quick start does: .ci/install_commands.py compares the
two. Tested on README texts of its own, so that the README can change without this test."""
import importlib.util
import subprocess
import sys
import time

import pytest

from .projects import ROOT

_spec = importlib.util.spec_from_file_location("install_commands",
                                               ROOT / ".ci" / "install_commands.py")
install_commands = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_commands)

CPU_WHEEL = "pip install torch==2.13.0"    # the README's CPU wheel (a local one on this machine)

README = f"""# torchgate

```bash
pip install something-else       # not the quick start
```

## Quick start

On a fresh machine:

```text
not a shell block: pip install nothing
```

```bash
python3 -m venv .venv && . .venv/bin/activate
{CPU_WHEEL}
pip install -e . && dvc repro    # pip install -e . in a comment
```

```bash
pip install -e '.[ray]'          # a later block
```

## Next
"""


def test_the_quick_starts_pip_installs_are_those_of_its_first_shell_block():
    block = install_commands.quick_start_block(README)
    assert install_commands.pip_installs(block) == [CPU_WHEEL, "pip install -e ."]


def test_quiet_flags_extras_quoting_and_python_m_pip_are_the_same_command():
    text = ("pip install -q torch==2.13.0\n"
            "python -m pip install --quiet -e '.[test,ray]'   # ray too\n"
            "echo pip install not-this; pip install \\\n  -e .\n")
    assert install_commands.pip_installs(text) == [CPU_WHEEL, "pip install -e .",
                                                   "pip install -e ."]


def test_ci_takes_the_quick_start_as_a_newcomer_who_skips_the_torch_step(tmp_path):
    """CI installs what the README says, less the CPU wheel: pip then resolves torch itself
    (the CUDA build on Linux), so the suite is run on the build a newcomer who skipped that
    step gets. Any other difference fails CI."""
    script = (ROOT / ".ci" / "run").read_text()
    assert install_commands.pip_installs(script) == ["pip install -e ."]
    readme = tmp_path / "README.md"
    readme.write_text(README)
    check = [sys.executable, str(ROOT / ".ci" / "install_commands.py"), str(readme),
             str(ROOT / ".ci" / "run")]
    assert subprocess.run(check + ["--without-torch"], capture_output=True,
                          text=True).returncode == 0
    out = subprocess.run(check, capture_output=True, text=True)     # torch step included
    assert out.returncode == 1
    assert "CI does not install as the README's quick start does" in out.stderr
    readme.write_text(README.replace("pip install -e .", "pip install -e '.[dev]' numpy"))
    out = subprocess.run(check + ["--without-torch"], capture_output=True, text=True)
    assert out.returncode == 1 and "['pip install -e . numpy']" in out.stderr


def test_only_a_command_that_installs_torch_alone_is_the_skipped_step():
    assert install_commands.installs_torch_alone("pip install torch==2.13.0")
    assert install_commands.installs_torch_alone(
        "pip install torch --index-url https://download.pytorch.org/whl/cpu")
    assert not install_commands.installs_torch_alone("pip install torch numpy")
    assert not install_commands.installs_torch_alone("pip install -e .")
    assert not install_commands.installs_torch_alone("pip install torchvision")


STUB = """#!/usr/bin/env bash
# python, except that `python -m pytest` exits $STUB_RC, its junit report saying $STUB_SKIPPED
# of 3 tests were skipped
if [ "$1 $2" = "-m pytest" ]; then
  for arg; do case "$arg" in --junitxml=*) junit="${arg#--junitxml=}";; esac; done
  echo "<testsuites><testsuite tests='3' skipped='$STUB_SKIPPED'/></testsuites>" > "$junit"
  exit "$STUB_RC"
fi
exec "$REAL_PYTHON" "$@"
"""


def run_the_test_step(tmp_path, rc: int, skipped: int = 0,
                      docs: str = "true") -> subprocess.CompletedProcess:
    """.ci/run's test step, from the README's test command on, with a stand-in pytest, beside
    `docs`, a stand-in for the docs' blocks run."""
    script = (ROOT / ".ci" / "run").read_text()
    step = script[script.index("# The README's test command"):]
    assert "python -m pytest -q" in step
    (tmp_path / "python").write_text(STUB)
    (tmp_path / "python").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "REAL_PYTHON": sys.executable,
           "STUB_RC": str(rc), "STUB_SKIPPED": str(skipped)}
    beside = f"docs_log=/dev/null\n{docs} &\ndocs=$!\n"
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + beside + step], env=env,
                          capture_output=True, text=True, cwd=tmp_path)


def test_ci_fails_when_pytest_ran_no_tests_or_skipped_them_all(tmp_path):
    nothing = run_the_test_step(tmp_path, 5)
    assert nothing.returncode == 1 and "pytest ran no tests (exit 5)" in nothing.stderr
    all_skipped = run_the_test_step(tmp_path, 0, skipped=3)
    assert all_skipped.returncode == 1 and "every test was skipped" in all_skipped.stderr
    failed = run_the_test_step(tmp_path, 1)
    assert failed.returncode == 1
    passed = run_the_test_step(tmp_path, 0, skipped=1)
    assert passed.returncode == 0 and "CI: 3 tests, 2 ran, 1 skipped" in passed.stdout
    docs_failed = run_the_test_step(tmp_path, 0, skipped=1, docs="false")
    assert docs_failed.returncode == 1 and "a block of the docs failed" in docs_failed.stderr


_spec = importlib.util.spec_from_file_location("readme_blocks", ROOT / ".ci" / "readme_blocks.py")
readme_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_blocks)


def test_ci_runs_every_line_of_the_docs_shell_blocks_or_says_why_not():
    """.ci/readme_blocks.py's plan holds each command line of every shell block, in the docs'
    order, as written (a skip names its reason); the README's workload files are written
    where its prose says, before the command that selects them."""
    steps = readme_blocks.plan(ROOT)
    lines = [line for doc in readme_blocks.DOCS
             for kind, body in readme_blocks.FENCE.findall((ROOT / doc).read_text())
             if kind in readme_blocks.SHELLS for line in readme_blocks.lines_of(body)]
    planned = [text.split("  —  ")[0] for what, text in steps if what in ("run", "skip")]
    assert [line for line in planned if line in lines] == lines
    assert sum(what == "run" for what, _ in steps) >= 15
    writes = [text.split("\n")[0] for what, text in steps if what == "write"]
    assert writes == ["stages/workloads/my_models.py", "conf/workload/conv_block.yaml"]
    after = [text for what, text in steps][[w for w, _ in steps].index("write") + 2]
    assert "conv_block" in after and after.startswith("dvc exp run")


def test_a_skip_no_doc_line_holds_fails_the_ci_run(monkeypatch):
    monkeypatch.setitem(readme_blocks.SKIP, "dvc gone", "a line the docs dropped")
    with pytest.raises(SystemExit, match="dvc gone"):
        readme_blocks.plan(ROOT)


def test_only_the_gate_may_fail_a_docs_repro():
    said = subprocess.CompletedProcess([], 255, "", "torchgate gate: failed: 1 REGRESSED")
    crashed = subprocess.CompletedProcess([], 255, "", "ERROR: failed to reproduce 'bench'")
    assert readme_blocks.gate_said_no(said) and not readme_blocks.gate_said_no(crashed)


def test_a_ray_cluster_of_the_docs_runs_on_one_machine_on_a_port_of_its_own():
    replace = readme_blocks.replace
    assert replace("ray start --head --port=6379 --resources='{}'", 4242) == \
        "ray start --head --port=4242 --resources='{}'"
    assert replace("dvc exp run -S a=HEAD:6379", 4242) == "dvc exp run -S a=127.0.0.1:4242"
    node = replace("ray start --address=HEAD:6379 --resources='{}'", 4242)
    assert node.startswith("ray start --address=127.0.0.1:4242") and "agent-grpc-port=" in node
    assert replace("torchgate compose", 4242) == "torchgate compose"


def test_a_docs_line_that_hangs_fails_the_run_after_its_time_limit(tmp_path, monkeypatch, capsys):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(readme_blocks, "plan", lambda root: [
        ("run", "true"), ("run", "sleep 30 & wait")])
    monkeypatch.setattr(readme_blocks, "LINE_TIMEOUT_S", 1)
    started = time.monotonic()
    assert readme_blocks.run(ROOT, tmp_path) == 1
    # Stopped with what it started: a child left alive would hold the output open for 30 s.
    assert time.monotonic() - started < 20
    out = capsys.readouterr().out
    assert "readme: ran" in out and "FAILED (still running after 1 s): sleep 30" in out


def test_the_docs_venv_sees_the_project_venvs_packages_never_the_systems(tmp_path):
    import sysconfig
    site = tmp_path / ".venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    env = {"PATH": "/usr/bin"}
    readme_blocks.venv(tmp_path, env)
    named = (site / "readme-run.pth").read_text().split()
    assert named and set(named) <= {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    assert all(path.startswith(sys.prefix) for path in named) and sys.prefix != sys.base_prefix
    assert env["PATH"] == f"{tmp_path / '.venv/bin'}:/usr/bin"
