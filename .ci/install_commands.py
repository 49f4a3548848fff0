"""CI installs the way the README tells a new user to: the `pip install` commands of the README's
quick start (its first fenced shell block under "## Quick start") must be the ones .ci/run runs.

    python3 .ci/install_commands.py README.md .ci/run [--without-torch]

exits 1, printing both lists, when they differ. --without-torch: CI takes the path of a newcomer
who skips the quick start's torch step (pip then resolves torch itself: the CUDA build on
Linux), so the README's commands are compared without the ones that install torch alone. Compared as commands, in order: `-q`/`--quiet`
flags and extras (`.[test,ray]` is `.`) are left out, quoting is the shell's, and
`python -m pip install` is `pip install`. Standard library only: it runs before any install.
"""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

SHELLS = {"bash", "sh", "shell", "console", "zsh", ""}
SEPARATORS = {"&&", "||", ";", "|", "&"}
QUIET = {"-q", "-qq", "-qqq", "--quiet"}
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")


def commands(text: str) -> list[list[str]]:
    """Every simple command of some shell text, as tokens: lines joined at a trailing
    backslash, comments dropped, split at `&&`, `;`, `|` ... . A leading `$ ` prompt goes."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = re.sub(r"^\s*\$\s+", "", line)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:          # an unclosed quote: not a command line
            continue
        command: list[str] = []
        for token in tokens + [";"]:
            if token in SEPARATORS:
                if command:
                    out.append(command)
                command = []
            else:
                command.append(token)
    return out


def pip_installs(text: str) -> list[str]:
    """The `pip install` commands of shell text, normalized (see the module's doc)."""
    found = []
    for command in commands(text):
        if command[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]):
            command = command[2:]
        if command[:2] != ["pip", "install"]:
            continue
        kept = [re.sub(r"\[[^\]]*\]$", "", t) for t in command if t not in QUIET]
        found.append(" ".join(kept))
    return found


def quick_start_block(readme: str) -> str:
    """The first fenced shell block under the README's "## Quick start" heading (before the
    next heading of the same level)."""
    lines = readme.splitlines()
    try:
        start = next(i for i, line in enumerate(lines)
                     if re.match(r"^##\s+Quick start\s*$", line, re.IGNORECASE))
    except StopIteration:
        raise SystemExit("README: no '## Quick start' section") from None
    fence, shell, block = None, False, []
    for line in lines[start + 1:]:
        if fence is None:
            if re.match(r"^##\s", line):
                break
            match = _FENCE.match(line)
            if match:
                fence, shell, block = match.group(1), match.group(2).lower() in SHELLS, []
        elif line.strip().startswith(fence):
            if shell:
                return "\n".join(block)
            fence = None
        else:
            block.append(line)
    raise SystemExit("README: no fenced shell block under '## Quick start'")


def installs_torch_alone(command: str) -> bool:
    words = command.split()[2:]
    return bool(words) and re.match(r"^torch([=<>!~].*)?$", words[0]) is not None and not any(
        w for w in words[1:] if not w.startswith("-") and "://" not in w)


def main(readme_path: str, script_path: str, *flags: str) -> int:
    readme = pip_installs(quick_start_block(Path(readme_path).read_text(encoding="utf-8")))
    if "--without-torch" in flags:
        readme = [c for c in readme if not installs_torch_alone(c)]
    script = pip_installs(Path(script_path).read_text(encoding="utf-8"))
    if not readme:
        print(f"{readme_path}: the quick start has no pip install command", file=sys.stderr)
        return 1
    if readme != script:
        print(f"CI does not install as the README's quick start does:\n"
              f"  {readme_path} (quick start): {readme}\n  {script_path}: {script}\n"
              f"Make them the same commands (-q flags and extras aside).", file=sys.stderr)
        return 1
    print(f"install commands as in the README's quick start: {script}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
