"""The README's words checked against the code: every configuration its commands (and
conf/config.yaml's examples) select composes and loads, its record versions are the code's,
and its summary excerpt is what the report stage prints. The quick start is CI's install
(test_ci.py); the upgrade workflow runs line by line in test_pipeline.py; CI runs every shell
block of the docs as written, in order, in a fresh clone (.ci/readme_blocks.py)."""
from __future__ import annotations

import re
import shlex
import shutil

import pytest

from torchgate.compose import compose
from torchgate.core import config
from torchgate.core.records import SCHEMA

from .projects import ROOT
from .test_ci import install_commands, readme_blocks

DOCS = readme_blocks.DOCS     # the docs whose blocks CI runs (.ci/readme_blocks.py)


def shell_blocks_of(text: str) -> list[str]:
    return [body for kind, body in readme_blocks.FENCE.findall(text)
            if kind in readme_blocks.SHELLS]


def shell_blocks(name: str) -> list[str]:
    return shell_blocks_of((ROOT / name).read_text(encoding="utf-8"))


def readme_commands(heading: str, block: int = 0) -> list[str]:
    """The lines of a shell block (the first) under the README's `heading`, comments dropped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1]
    body = shell_blocks_of(text.split("\n## ", 1)[0])[block]
    return [line.split("   #")[0].strip() for line in body.splitlines() if line.strip()]


def selections() -> list[tuple[str, tuple[str, ...]]]:
    """(where, overrides) of every `dvc exp run -S` and `torchgate compose` in the docs'
    command blocks and conf/config.yaml's comment examples; a line with a shell expansion
    or a placeholder (`$(...)`, `<name>`) is left out."""
    texts = [(name, block) for name in DOCS for block in shell_blocks(name)]
    texts.append(("conf/config.yaml", "\n".join(
        line.lstrip("#").split("  ")[1] for line in
        (ROOT / "conf/config.yaml").read_text(encoding="utf-8").splitlines()
        if re.match(r"^#\s+(dvc exp run|torchgate compose) ", line))))
    found = []
    for where, text in texts:
        for words in install_commands.commands(text):
            if words[:3] == ["dvc", "exp", "run"]:
                overrides = [v for flag, v in zip(words, words[1:]) if flag in ("-S",
                                                                                 "--set-param")]
            elif words[:2] == ["torchgate", "compose"]:
                overrides = words[2:]
            else:
                continue
            if overrides and not any(re.search(r"[$<>]|/path/to/", o) for o in overrides):
                found.append((where, tuple(overrides)))
    return sorted(set(found))


def test_the_docs_select_configurations_at_all():
    chosen = selections()
    assert len(chosen) >= 8, chosen
    assert ("README.md", ("matrix=smoke",)) in chosen


@pytest.mark.parametrize("where, overrides", selections(),
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_each_configuration_the_docs_select_composes_and_loads(tmp_path, where, overrides):
    """What a user pastes from the docs is a configuration torchgate accepts (a bad Hydra
    override, a key or choice that is gone, a value the typed layer refuses fails here), with
    the files the README has the user write beside it (the Ray example's device)."""
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    for name, body in README_WRITES.items():
        (conf / name).write_text(body)
    params = tmp_path / "params.yaml"
    compose(params, list(overrides), conf=conf)
    config.load(params)


# The README's Ray section: "`h100.yaml`: `type: cuda`, `accelerator_type: H100`,
# `resources: {h100_box: 1}`".
README_WRITES = {"device/h100.yaml": "h100:\n  type: cuda\n  accelerator_type: H100\n"
                                     "  resources: {h100_box: 1}\n"}


def test_the_record_versions_the_readme_names_are_the_codes():
    text = " ".join((ROOT / "reports/README.md").read_text(encoding="utf-8").split())
    named = re.search(r"its own `schema_version` \(([^)]*)\)", text).group(1)
    assert dict((k, int(v)) for k, v in (part.split() for part in named.split(", "))) == SCHEMA


def test_a_shell_line_of_the_docs_is_one_the_shell_parses():
    """Unclosed quotes, unquoted brackets zsh globs (`-S precision=[fp32]`)."""
    for name in DOCS:
        for block in shell_blocks(name):
            for line in block.replace("\\\n", " ").splitlines():
                shlex.split(line, comments=True)
                assert not re.search(r"(^|\s)-S\s+[^'\"\s]*\[", line), (name, line)


def excerpt_table() -> list[list[str]]:
    """The README's summary excerpt: its cell table, as cells."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("The first run's summary (an excerpt", 1)[1].split("```\n", 1)[1]
    lines = [line for line in block.split("```", 1)[0].splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines
            if not set(line) <= set("|-: ")]


SECONDS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}


def test_the_readme_summary_excerpt_has_the_columns_and_digits_the_report_prints():
    """The columns of a first run of the default matrix on a CPU with valgrind (counted, and
    `transformer_block`'s tail latency), each number as the summary's formats write it: a stale
    excerpt fails here."""
    from torchgate.render.markdown import nbytes, seconds
    from torchgate.render.numbers import _count, _dollars, cell_columns
    header, *rows = excerpt_table()
    assert header == cell_columns(tails=True, counted=True)
    assert rows
    for row in rows:
        unit = dict(zip(header, row))
        assert unit["change [CI]"] == "NEW"
        for text in (unit["steady state"], unit["warm-up"],
                     *unit["first call (cold / warm)"].split(" / "),
                     *filter(None, unit["latency p50 / p99"].split(" / "))):
            value, scale = text.split()
            assert seconds(float(value) * SECONDS[scale]) == text, text
        items = float(unit["items/s"].replace(",", ""))
        assert _count(items) == unit["items/s"]
        assert _dollars(float(unit["$ / M items"].lstrip("$"))) == unit["$ / M items"]
        assert nbytes(float(unit["peak memory"].split()[0]) * 2 ** 20) == unit["peak memory"]
        assert f"{int(unit['host instructions (change)'].replace(',', '')):,}" == unit[
            "host instructions (change)"]


def test_torchgate_compose_reads_the_conf_of_the_project_it_runs_in(project):
    """As `dvc exp run` does: the `torchgate` command may be installed from another clone (it
    is here: this checkout's), and a workload only this project's conf/ has is composed."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml
    (project / "conf/workload/only_here.yaml").write_text(
        "only_here:\n  _target_: torchgate.workloads.matmul_relu\n  size: 8\n")
    done = subprocess.run([Path(sys.executable).with_name("torchgate"), "compose",
                           "workload=[only_here]"], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert list(yaml.safe_load((project / "params.yaml").read_text())["workload"]) == [
        "only_here"]


INLINE = re.compile(r"`((?:torchgate|python3? -m) [^`]+)`")


def doc_commands() -> list[tuple[str, list[str]]]:
    """(doc, words) of every simple command in the docs' shell blocks and inline code that
    starts `torchgate ` or `python -m `, an env prefix (`TORCHGATE_MACHINE=x torchgate ...`)
    dropped; a placeholder (`<tool>`) is no command."""
    found = []
    for name in DOCS:
        text = (ROOT / name).read_text(encoding="utf-8")
        inline = [" ".join(span.split()) for span in INLINE.findall(text)
                  if not re.match(r"\S+ \S+:", span)]     # a line it prints: "torchgate gate: …"
        for block in shell_blocks(name) + [line for line in inline if "<" not in line]:
            for words in install_commands.commands(block):
                while words and re.match(r"^\w+=", words[0]):
                    words = words[1:]
                if words:
                    found.append((name, words))
    return found


def test_every_torchgate_and_module_command_in_the_docs_exists_with_its_options():
    """A tool renamed or retired, an option gone: the docs' line fails here, not a user's
    paste. `torchgate <tool>` is a tool its --help lists and each --option one that tool's
    --help names; `python -m <module>` a module that imports."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    script = str(Path(sys.executable).with_name("torchgate"))
    helps: dict[str, str] = {}

    def help_of(tool: str) -> str:
        if tool not in helps:
            shown = subprocess.run([script, *([tool] if tool else []), "--help"],
                                   capture_output=True, text=True)
            assert shown.returncode == 0, (tool, shown.stderr)
            helps[tool] = shown.stdout
        return helps[tool]

    checked = 0
    for doc, words in doc_commands():
        if words[0] == "torchgate":
            tool = words[1] if len(words) > 1 and not words[1].startswith("-") else ""
            assert not tool or f"torchgate {tool}" in help_of(""), (doc, words)
            for option in (w.split("=")[0] for w in words[1:] if w.startswith("--")):
                assert option in help_of(tool), (doc, words, option)
            checked += 1
        elif words[:2] in (["python", "-m"], ["python3", "-m"]) and len(words) > 2 \
                and words[2] not in ("pip", "venv", "pytest"):
            assert importlib.util.find_spec(words[2]) is not None, (doc, words)
            checked += 1
    assert checked >= 10, checked
