"""Host instructions per call, counted under valgrind's callgrind: a count of the work the host
does that two processes of the same code agree on to 0.1-0.5 % (where the stack and heap
start moves it; judge.counts tests it), where their wall times differ by 5-20 % on a shared
machine.

The launcher starts a counts worker under `command()`: cache simulation off (instruction
counts only), instrumentation and collection off from the start (importing torch under full
instrumentation takes four times as long), address-space randomization off, one thread, a
fixed hash seed, its arguments and environment padded to one size and its stack's start
drawn at random (`drawn_layout`: each count one of the code's layouts). The
worker builds and warms each mode up at valgrind's uninstrumented speed, then switches
instrumentation on (a client request, `Client`), collects exactly the counted calls with the
garbage collector off, and dumps them; `totals` reads a dump. A compiled mode is counted with
its graphs compiled in an empty cache and loaded back (measure.worker.count_instructions).

Valgrind's emulated CPU offers torch fewer vector extensions than the host (no AVX-512), and
runs fused multiply-adds slowly, so the counted code path is not the native one (ATen's and
inductor's AVX2 kernels, MKL's and oneDNN's SSE4 ones: `X86_CAPABILITY`): counts compare with
counts taken the same way (the same valgrind, ISA settings and options: `Counter`), never
with native cost.
Standard library only: the launcher builds the command without torch.
"""
from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import platform
import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

from torchgate.core.vocabulary import REST

# Options that decide what a count means: part of the record (Counter.settings).
OPTIONS = ("--tool=callgrind", "--cache-sim=no", "--instr-atstart=no", "--collect-atstart=no")
# The worker's environment under valgrind: the same hash seeds and thread count in every
# process, so that two processes run the same instructions; on x86-64 AVX2, the widest ISA
# valgrind emulates, whatever the host has: ATen's kernels, and inductor's C++ compiled for
# x86-64-v3 instead of -march=native (whose AVX-512 encodings valgrind cannot run: SIGILL,
# seen in bf16 kernels). Inductor's cache keys its kernels by that flag: the counts process
# compiles its own where the timed processes' caches hold native ones.
# MKL (BLAS, and the vector math ATen's tanh, exp... call) and oneDNN (convolutions) take
# their SSE4 kernels: valgrind runs each lane of a fused multiply-add through a helper call,
# and their AVX2 kernels are made of them. Measured under valgrind, a 64x256 by 256x256
# matmul took 355 ms a call on the AVX2 path and 1.7 ms on SSE4.2 (0.1 ms natively), a
# 64x256 tanh 18.7 ms and 0.4 ms, a 32-channel 3x3 convolution 731 ms and 12 ms: a chain of
# 100 matmul + tanh counted in 556 s, now in about a minute.
PINNED = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
X86_CAPABILITY = {"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CPP_MARCH": "x86-64-v3",
                  "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}
DUMPS = "TORCHGATE_CALLGRIND_OUT"     # the dump files' stem, for the worker to read
VERSION = "TORCHGATE_VALGRIND"        # valgrind's version, for the worker's record
INSTALL = "install valgrind (Debian, Ubuntu: `sudo apt-get install valgrind`; Fedora: " \
          "`sudo dnf install valgrind`), or set bench.instructions=never"


def missing() -> str | None:
    """Why host instructions cannot be counted here (one line); None: they can."""
    if platform.system() != "Linux":
        return f"callgrind counts on Linux only, not {platform.system()}"
    if shutil.which("valgrind") is None:
        return f"valgrind is not installed: {INSTALL}"
    return None


def version() -> str | None:
    try:
        out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.removeprefix("valgrind-") or None


# The client's stack starts below its argument and environment strings and the pointers to
# them, and the heap holds a copy of the environment: a process whose paths are 2 bytes longer
# (another pid's width, another arm's worktree or venv) counts ~140 more instructions a call,
# a layout effect; 100 matmul + tanh layers (11.4 M a call) counted 0.1-0.3 % apart as the
# stack's start moved by multiples of 16 bytes. No one layout stands for the code: the counts
# process gets a variable that first pads argv and env to one size (the arms' and runs' own
# lengths drop out), then moves the stack's start by a random 0-4 KiB (and the heap's copy
# with it), drawn per process, so that each count is a draw from the code's layouts and
# the counts of a unit average over them (Stabilizer's argument; judge.counts tests them).
LAYOUT_PAD = "TORCHGATE_LAYOUT_PAD"
LAYOUT_BYTES = 1 << 16     # a string may be 128 KiB (MAX_ARG_STRLEN)
LAYOUT_DRAWN = 4096        # the window the stack's start is drawn from, in 16-byte steps


def stack_bytes(argv: list[str], env: dict[str, str]) -> int:
    """The bytes argv and env take at the top of a new process's stack: their strings (each
    with its NUL; the program's path twice, as argv[0] and AT_EXECFN) rounded to a word, and a
    pointer each with the two NULL ones (valgrind's client stack, coregrind m_initimg)."""
    strings, pointers = _strings_and_pointers(argv, env)
    return -(-strings // 8) * 8 + pointers


def _strings_and_pointers(argv: list[str], env: dict[str, str]) -> tuple[int, int]:
    strings = sum(len(a.encode()) + 1 for a in argv) + len(argv[0].encode()) + 1 + sum(
        len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())
    return strings, 8 * (len(argv) + len(env) + 2)


def drawn_layout(argv: list[str], env: dict[str, str], offset: int | None = None
                 ) -> dict[str, str]:
    """`env` with LAYOUT_PAD sized so that `stack_bytes` is LAYOUT_BYTES plus `offset` (a
    multiple of 16 below LAYOUT_DRAWN; None: drawn at random), its strings filling their
    words exactly (argv: the client's command, as the counted program receives it). An
    environment already larger is left as it is."""
    if offset is None:
        offset = 16 * random.SystemRandom().randrange(LAYOUT_DRAWN // 16)
    env = {k: v for k, v in env.items() if k != LAYOUT_PAD}
    strings, pointers = _strings_and_pointers(argv, {**env, LAYOUT_PAD: ""})
    short = LAYOUT_BYTES + offset - pointers - strings
    return {**env, LAYOUT_PAD: "x" * short} if short >= 0 else env


def pinned() -> dict[str, str]:
    return {**PINNED, **(X86_CAPABILITY if client_requests_supported() else {})}


def command(argv: list[str], dumps: Path) -> tuple[list[str], dict[str, str]]:
    """`argv` (the worker's command) under callgrind, and the variables its process needs;
    without `setarch` (ASLR stays on) the counts move a little more between processes. Each
    process of the run (a data loader's forked workers too) dumps to files of its own pid."""
    run = ["valgrind", "-q", *options_for_machine(), f"--callgrind-out-file={dumps}.%p",
           *argv]
    if shutil.which("setarch"):
        run = ["setarch", platform.machine(), "-R", *run]
    return run, {**pinned(), DUMPS: str(dumps), VERSION: version() or "unknown"}


def settings() -> tuple[str, ...]:
    """What a count's record says about how it was taken (read in the counts process)."""
    return (*options_for_machine(), *(f"{k}={os.environ.get(k)}" for k in sorted(pinned())),
            "ASLR off" if _aslr_off() else "ASLR on",
            f"stack strings padded to {LAYOUT_BYTES} bytes, then a drawn 0-{LAYOUT_DRAWN}"
            if LAYOUT_PAD in os.environ else "stack strings unpadded")


def _aslr_off() -> bool:
    """This process runs without address-space randomization (setarch -R: its personality's
    ADDR_NO_RANDOMIZE bit, 0x0040000, in /proc)."""
    try:
        text = Path("/proc/self/personality").read_text(encoding="ascii")
    except OSError:
        return False
    return bool(int(text.strip() or "0", 16) & 0x0040000)


def totals(path: Path) -> int:
    """The instructions a callgrind dump holds (its `totals:` line, else `summary:`)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = re.search(r"^totals:\s+(\d+)", text, re.M) or re.search(
        r"^summary:\s+(\d+)", text, re.M)
    if found is None:
        raise ValueError(f"{path.name} is not a callgrind dump: no totals line")
    return int(found.group(1))


# ---- where the instructions went ---------------------------------------------------------
# A dump holds each function's own instructions (its cost lines) and, after each `calls=`
# line, the inclusive cost of a call it made: a function's self cost is its cost lines less
# those. Names are compressed: `fn=(12) name` defines 12, a later `fn=(12)` refers to it; the
# objects (`ob=`, `cob=`), files (`fl=`, `fi=`, `fe=`, `cfi=`, `cfl=`) and functions (`fn=`,
# `cfn=`) each number their own (valgrind's docs, "Callgrind Format Specification").
_NAMED = re.compile(r"^(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn)=(?:\((\d+)\))?\s*(.*)$")
_SPACE = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn"}   # the rest are files
KEPT_SHARE = 0.001          # a function kept in the record: at least 0.1 % of the dump's total
KEPT_MOST = 30              # and at most this many, the largest
# A library's instructions in functions not kept are one entry a library (REST, at least
# KEPT_SHARE): "by library" then sums all of each library's work, not its largest functions'.
ANONYMOUS = "(anonymous namespace)"


_CACHE_KEY = re.compile(r"\b(?=[0-9a-z]*\d)[0-9a-z]{20,}\b")


def without_keys(name: str) -> str:
    """A generated thing's name without its cache key, which differs wherever the code does
    (inductor's kernels `c45gacx….main.so`, a compiled graph's call)."""
    return _CACHE_KEY.sub("…", name)


def library(ob: str) -> str:
    """A shared object's file name, a generated one's without its cache key."""
    return ob if ob == "???" else without_keys(Path(ob).name)


def self_costs(path: Path) -> dict[tuple[str, str], int]:
    """(function, shared object) -> its own instructions in one dump, every function."""
    names: dict[tuple[str, str], str] = {}
    found: dict[tuple[str, str], int] = {}
    ob = fn = "???"
    positions = 1
    inclusive_next = False
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line or line[0] in "#\n":
                continue
            head = line[0]
            if head.isdigit() or head in "+-*":
                if inclusive_next:            # a call's inclusive cost: the callee's
                    inclusive_next = False
                    continue
                parts = line.split()
                if len(parts) > positions:
                    key = (fn, ob)
                    found[key] = found.get(key, 0) + int(parts[positions])
                continue
            if line.startswith("calls="):
                inclusive_next = True
                continue
            if line.startswith("positions:"):
                positions = len(line.split()) - 1
                continue
            named = _NAMED.match(line.rstrip("\n"))
            if named is None:
                continue
            kind, number, name = named.groups()
            space = _SPACE.get(kind, "fl")
            if number is not None:
                if name:
                    names[space, number] = name
                name = names.get((space, number), "???")
            if kind == "ob":
                ob = name
            elif kind == "fn":
                fn = name
    return found


def short_name(symbol: str, most: int = 100) -> str:
    """A symbol as users search it: its parameter list dropped, template arguments cut to
    `<…>`, at most `most` characters (callgrind has demangled it already)."""
    out, depth, paren = [], 0, 0
    # A recursion level (--separate-recs), a compiler's clone ("[clone .isra.0]")
    for ch in re.sub(r"(\s*\[clone [^\]]*\])+$", "", re.sub(r"'\d+$", "", symbol)):
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
            continue
        if ch == ">" and depth:
            depth -= 1
            continue
        if depth:
            continue
        out.append(ch)
    text = "".join(out)
    # The last top-level parameter list (an "(anonymous namespace)" is part of the name).
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            paren += 1
        elif text[i] == "(":
            paren -= 1
            if paren == 0 and not text[i:].startswith(ANONYMOUS):
                text = text[:i] if text.endswith(")") or text.endswith(") const") else text
                break
    # A template function's return type comes first ("void at::vec::map<…>").
    kept = {ANONYMOUS: "\0", "operator ": "\1"}         # spaces inside a name
    for name, mark in kept.items():
        text = text.replace(name, mark)
    text = text.split()[-1] if text.strip() else text
    for name, mark in kept.items():
        text = text.replace(mark, name)
    text = re.sub(r"^0x0+(?=[0-9a-f])", "0x", text)      # an unnamed function's address
    return text if len(text) <= most else text[:most - 1] + "…"


def elf_functions(path: str) -> list[tuple[int, int, str]]:
    """(address, size, name) of each symbol an ELF shared object exports for code or untyped
    (its .dynsym), by address; [] where the file is not a readable 64-bit little-endian ELF.
    Callgrind names a function it found no symbol for by its address, which the exported
    table may still name (MKL's kernels inside libtorch_cpu.so: `0xdcf2770` is
    mkl_blas_mc3_sgemm_kernel_1_0)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return []
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize)
                        for i in range(shnum)]
            dynsym = next((sec for sec in sections if sec[1] == 11), None)   # SHT_DYNSYM
            if dynsym is None:
                return []
            strtab = sections[dynsym[6]]
            f.seek(dynsym[4])
            symbols = f.read(dynsym[5])
            f.seek(strtab[4])
            names = f.read(strtab[5])
    except (OSError, struct.error, IndexError):
        return []
    found = []
    for name, info, _, shndx, value, size in struct.iter_unpack("<IBBHQQ", symbols):
        # A function, an indirect one, or an untyped symbol (MKL's assembly kernels: size 0)
        if info & 0xF in (0, 2, 10) and shndx and value:
            end = names.find(b"\0", name)
            found.append((value, size, names[name:end].decode(errors="replace")))
    return sorted(found)


def _named(fn: str, ob: str, tables: dict[str, list]) -> str:
    """A function callgrind named by its address, by the object's exported name for it."""
    if not re.fullmatch(r"0x[0-9a-f]+", fn) or ob == "???":
        return fn
    if ob not in tables:
        tables[ob] = elf_functions(ob)
    address = int(fn, 16)
    i = bisect.bisect_right(tables[ob], (address, float("inf"), "")) - 1
    if i >= 0:
        start, size, name = tables[ob][i]
        if start == address or start <= address < start + size:
            return name
    return fn


def spent(paths: list[Path], calls: int) -> tuple[tuple[str, str, int], ...]:
    """The largest functions of the counted calls, by their own instructions per call:
    (function, shared object's file name, instructions), at least KEPT_SHARE of the total
    each, at most KEPT_MOST; the same function under several names (template instances,
    clones) summed under its short name; then each library's other functions as one REST."""
    merged: dict[tuple[str, str], int] = {}
    tables: dict[str, list] = {}
    for path in paths:
        for (fn, ob), n in self_costs(path).items():
            key = (short_name(_named(fn, ob, tables)), library(ob))
            merged[key] = merged.get(key, 0) + n
    total = sum(merged.values())
    kept = sorted(((fn, ob, n) for (fn, ob), n in merged.items()
                   if n >= KEPT_SHARE * total), key=lambda x: (-x[2], x[0], x[1]))[:KEPT_MOST]
    rest: dict[str, int] = {}
    for (fn, ob), n in merged.items():
        rest[ob] = rest.get(ob, 0) + n
    for _, ob, n in kept:
        rest[ob] -= n
    kept += sorted(((REST, ob, n) for ob, n in rest.items() if n >= KEPT_SHARE * total),
                   key=lambda x: (-x[2], x[1]))
    return tuple((fn, ob, round(n / calls)) for fn, ob, n in kept)


# ---- client requests --------------------------------------------------------------------
# valgrind.h's client request is a no-op instruction sequence that valgrind recognizes: four
# rotations of rdi that add up to 128 bits (the register is unchanged natively), then `xchg
# rbx, rbx`; rax points at the request and its arguments, rdx returns the answer (natively:
# the default it held). Issued from a few bytes of machine code, so that no compiler and no
# valgrind headers are needed. x86-64 only; elsewhere instrumentation stays on from the start.
_X86_64 = bytes([
    0x48, 0x89, 0xF8,               # mov rax, rdi      (the request block)
    0x48, 0x89, 0xF2,               # mov rdx, rsi      (the default answer)
    0x48, 0xC1, 0xC7, 0x03,         # rol rdi, 3
    0x48, 0xC1, 0xC7, 0x0D,         # rol rdi, 13
    0x48, 0xC1, 0xC7, 0x3D,         # rol rdi, 61
    0x48, 0xC1, 0xC7, 0x33,         # rol rdi, 51
    0x48, 0x87, 0xDB,               # xchg rbx, rbx     (the request)
    0x48, 0x89, 0xD0,               # mov rax, rdx
    0xC3])                          # ret
_RUNNING_ON_VALGRIND = 0x1001
_CALLGRIND = (ord("C") << 24) | (ord("T") << 16)
_START_INSTRUMENTATION = _CALLGRIND + 4
_STOP_INSTRUMENTATION = _CALLGRIND + 5


def client_requests_supported() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def options_for_machine() -> tuple[str, ...]:
    """Instrumentation off until the counted calls where a client request can switch it on."""
    return OPTIONS if client_requests_supported() else tuple(
        "--instr-atstart=yes" if o == "--instr-atstart=no" else o for o in OPTIONS)


class Client:
    """Requests to the valgrind this process runs under (all no-ops natively)."""

    def __init__(self):
        self._call = None
        if not client_requests_supported():
            return
        try:
            self._code = mmap.mmap(-1, mmap.PAGESIZE,
                                   prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        except (OSError, ValueError, AttributeError):   # no writable code pages (W^X)
            return
        self._code.write(_X86_64)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._code))
        self._call = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong)(address)

    def _request(self, code: int, default: int = 0) -> int:
        if self._call is None:
            return default
        block = (ctypes.c_ulong * 6)(code, 0, 0, 0, 0, 0)
        return self._call(ctypes.addressof(block), default)

    @property
    def on_valgrind(self) -> bool:
        return self._request(_RUNNING_ON_VALGRIND) > 0

    def start_instrumentation(self) -> None:
        """From here on callgrind instruments the code it runs (translating it again)."""
        self._request(_START_INSTRUMENTATION)

    def stop_instrumentation(self) -> None:
        """Back to valgrind's uninstrumented speed (the next mode's compile runs there)."""
        self._request(_STOP_INSTRUMENTATION)


class Dumps:
    """The dumps of this process, in the order it asks for them (`<stem>.1`, `<stem>.2` …)."""

    def __init__(self, stem: str | None = None):
        self.stem = stem or os.environ.get(DUMPS)
        self.taken = 0

    def next(self) -> Path:
        """The dump just taken."""
        self.taken += 1
        return Path(f"{self.stem}.{os.getpid()}.{self.taken}")
