"""The pages people read first: the summary's numbers per cell, compare.md sorted by effect with
the EQUIVALENT rows folded, the pictures (real PNGs, drawn the same way twice) and the small
files for `dvc metrics diff`."""
import io
import json
import random
import re

import pytest
import yaml
from PIL import Image

from torchgate.core.config.settings import Gate
from torchgate.core.records import write_text
from torchgate.core.records.rows import CompareRecord
from torchgate.core.records.schema import BenchProcess, Sentinel
from torchgate.judge.environment import hardware_key
from torchgate.judge.gate import gate_failures
from torchgate.judge.summary import summarize
from torchgate.judge.timings import bench_rows
from torchgate.judge.verdicts import finish
from torchgate.render.metrics import change_key, decisions, numbers
from torchgate.render.numbers import environment_change
from torchgate.render.plots import forest, medians, nice_ticks, pictures, plot_data, speedup
from torchgate.render.summary import summary
from torchgate.render.verdicts import table

from .projects import ROOT, dvc, git
from .records import BUSY, DELTA, bench, mode, process

PRICE = 0.36          # $ per device-hour: 1e-4 $ per second


def two_modes(steady: float, compiled: float, seed: int, n: int = 5) -> list[BenchProcess]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        def one(s):
            return mode([s * rng.uniform(0.99, 1.01) for _ in range(8)], first=0.5, warm=0.1,
                        peak=200 * 2 ** 20)
        out.append(BenchProcess("OK", sentinel=Sentinel(0.02, 0.004),
                                modes={"eager": one(steady), "compiled": one(compiled)}))
    return out


def summaries(now, base=None, cell="cpu-fp32"):
    """The judge's summary of a cell, as the report stage computes it once per run."""
    return {cell: summarize(cell, now, PRICE, BUSY, base)}


def run(now: dict, base: dict | None):
    """A cell's compare record from per-workload (eager, compiled) steady states."""
    def record(spec, seed):
        return bench({w: two_modes(e, c, seed + i) for i, (w, (e, c)) in
                      enumerate(sorted(spec.items()))}, modes=("eager", "compiled"))
    now_r = record(now, 1)
    base_r = record(base, 100) if base else None
    result = finish(bench_rows("cpu-fp32", now_r, base_r, DELTA, None), alpha=0.05,
                    power=0.8, has_baseline=base is not None)
    rows = tuple(result.rows)
    return now_r, base_r, CompareRecord("HEAD", base is not None, 0.05, result.tests, rows=rows)


NOW = {"fast": (1e-3, 5e-4), "slower": (1.3e-3, 1e-3), "same": (2e-3, 2e-3)}
BASE = {"fast": (1e-3, 5e-4), "slower": (1e-3, 1e-3), "same": (2e-3, 2e-3)}


def test_the_numbers_come_first_with_throughput_cost_and_the_regression_on_top():
    now, base, compare = run(NOW, BASE)
    page = summary("cpu", compare, [("torch.version", "2.13.0+cpu", "2.14.1"),
                                    ("os.release", "6.1", "6.2")], None, ["cpu-fp32"],
                   ("REGRESSED",), summaries(now))
    head = page.split("## Numbers")[0]
    assert "Environment: torch 2.13.0+cpu → 2.14.1 (and 1 more field" in head
    assert "1 regressed or failed" in head
    units = [cells(line) for line in page.split("### `cpu-fp32`")[1].split("\n\n")[1]
             .splitlines()[2:]]
    assert units[0][:2] == ["slower", "eager"]                  # the regression first
    assert re.fullmatch(r"\+(29|30)\.\d % \[.*\] REGRESSED", units[0][3])
    # 1 item per call at 1 ms: 1,000 items/s, and 1e6 items cost 1,000 s at 1e-4 $/s.
    fast = next(u for u in units if u[:2] == ["fast", "eager"])
    assert float(fast[4].replace(",", "")) == pytest.approx(1000, rel=0.02)
    assert float(fast[5].lstrip("$")) == pytest.approx(0.1, rel=0.02)
    assert fast[6] == "500 ms" and fast[8] == "200 MiB"
    numbers = summaries(now)["cpu-fp32"].unit("fast", "eager")
    assert numbers.usd_per_million == pytest.approx(0.1, rel=0.02)
    # Changes only: the baseline's numbers are not repeated when nothing is recorded.
    first = summary("cpu", run(NOW, None)[2], [], "no baseline environment", ["cpu-fp32"], (),
                    summaries(now), env={"torch": {"version": "2.13.0+cpu"}})
    assert "Environment: torch 2.13.0+cpu (no baseline environment)." in first
    assert "| NEW " in first



def test_a_what_ifs_summary_names_both_builds_it_measured_not_the_baselines():
    """The timings compare the candidate with this environment: "unchanged against the
    baseline" above an A/B of two torch builds read as if nothing had moved."""
    now, _, compare = run(NOW, BASE)
    page = summary("cpu", compare, [("torch.version", "2.13.0+cpu", "2.14.1"),
                                    ("os.release", "6.1", "6.1-b")], None, ["cpu-fp32"], (),
                   summaries(now), candidate="bench/cpu-fp32.md")
    assert ("Environment: torch 2.13.0+cpu → 2.14.1 (this environment → the candidate; "
            "and 1 more field, see [bench/cpu-fp32.md](bench/cpu-fp32.md)).") in page
    assert "2 field(s) differ between this environment and the candidate" in page
    same = summary("cpu", compare, [], None, ["cpu-fp32"], (), summaries(now),
                   candidate="bench/cpu-fp32.md")
    assert "Environment: no field differs (this environment → the candidate)." in same
    assert "The candidate's environment is this one's." in same

def test_the_environment_line_names_what_an_upgrade_changed():
    line = environment_change([("hardware.nvidia_driver", "550.1", "560.2"),
                               ("python.version", "3.11.7", "3.12.1"),
                               ("torch.version", "2.13.0", "2.14.1")], None)
    assert line == ("Environment: torch 2.13.0 → 2.14.1; driver 550.1 → 560.2; "
                    "Python 3.11.7 → 3.12.1.")
    assert environment_change([], None) == "Environment: unchanged against the baseline."


def test_compare_md_sorts_by_effect_folds_the_equivalent_rows_and_names_the_stage():
    _, _, compare = run({"a": (1.5e-3, 1e-3), "b": (1.2e-3, 1e-3), "c": (1e-3, 1e-3)},
                        {"a": (1e-3, 1e-3), "b": (1e-3, 1e-3), "c": (1e-3, 1e-3)})
    text = table(list(compare.rows))
    shown, folded = text.split("<details>")
    regressed = [line for line in shown.splitlines() if line.startswith("| REGRESSED")]
    assert [line.split("|")[4].strip() for line in regressed[:2]] == ["a", "b"]   # +50 %, +20 %
    assert all("| bench " in line for line in regressed)
    assert "EQUIVALENT" not in shown and "| EQUIVALENT" in folded
    assert re.match(r"<summary>\d+ EQUIVALENT", folded)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(data)) as image:
        image.verify()
        return image.size


def test_the_pictures_are_real_pngs_drawn_the_same_way_twice():
    now, base, compare = run(NOW, BASE)
    drawn = pictures(summaries(now, base), compare.rows)
    assert set(drawn) == {"changes.png", "steady.png", "speedup.png", "where.png"}
    assert drawn.pop("where.png") is None           # no unit says where its change went
    for data in drawn.values():
        width, height = png_size(data)
        assert width >= 400 and height >= 250
    again = pictures(summaries(now, base), compare.rows)
    assert again == {**drawn, "where.png": None}   # no date or version stamp: clean git diffs
    # One row per tested change: the forest grows with the run.
    small = forest([r for r in compare.rows if r.workload == "fast"])
    assert png_size(small)[1] < png_size(drawn["changes.png"])[1]


def test_nothing_to_draw_is_no_picture():
    now, _, first = run(NOW, None)
    assert forest(first.rows) is None                     # no baseline: no change to draw
    only_eager = bench({"w": [process()]})
    assert speedup(summaries(only_eager, cell="c")) is None   # one mode: nothing compiled
    assert medians({}) is None


def test_the_plot_data_is_what_the_pictures_draw():
    now, base, compare = run(NOW, BASE)
    data = plot_data(summaries(now), compare.rows)
    changes = data["changes.csv"].splitlines()
    assert changes[0] == "unit,ratio,ci_low,ci_high,delta,verdict"
    slower = next(line for line in changes if line.startswith("cpu-fp32 · slower · eager · "
                                                                "steady"))
    assert 1.25 < float(slower.split(",")[1]) < 1.35 and slower.endswith("REGRESSED")
    gains = dict(line.split(",") for line in data["speedup.csv"].splitlines()[1:])
    assert float(gains["cpu-fp32 · fast"]) == pytest.approx(2.0, rel=0.03)


def test_ticks_are_round_numbers_inside_the_range():
    assert nice_ticks(4e-5, 6e-4) == pytest.approx([5e-5, 1e-4, 2e-4, 5e-4])
    fine = nice_ticks(1.6e-4, 4.6e-4)
    assert len(fine) >= 3 and all(1.6e-4 <= t <= 4.6e-4 for t in fine)


def test_metrics_json_is_small_and_says_what_the_run_decided():
    now, base, compare = run(NOW, BASE)
    found = decisions(compare, ["1 REGRESSED"])
    assert found["gate_failed"] == 1 and found["verdicts"]["regressed"] >= 1
    slower = found["changes"]["cpu-fp32"]["slower"]["eager"]
    assert slower["steady_low_pct"] < slower["steady_change_pct"] < slower["steady_high_pct"]
    assert 25 < slower["steady_change_pct"] < 35, slower
    units = [m for cell in found["changes"].values() for w in cell.values() for m in w.values()]
    assert len(units) == 3 * 2 and all(len(m) <= 8 for m in units)   # a few keys a unit
    assert found["verdicts"]["failed"] == 0 and "missing" in found["verdicts"]   # zeros too
    for r in compare.rows:      # an estimate no verdict decided has no key
        if r.stage == "bench" and r.verdict in ("INCONCLUSIVE", "NOT COMPARABLE"):
            assert change_key(r.metric) not in found["changes"].get(r.cell, {}).get(
                r.workload, {}).get(r.mode, {})
    flat = numbers(summaries(now), {}, compare, hardware_key(
        {"hardware": {"cpu_model": "AMD EPYC", "gpu_names": []}, "torch": {"num_threads": 2}}))
    assert flat["hardware"] == {"cpu_model": "AMD EPYC", "gpu_names": "", "torch_threads": 2}
    assert flat["bench"]["cpu-fp32"]["sentinel_loop_ms"] == pytest.approx(20.0)


@pytest.mark.slow
def test_dvc_metrics_diff_in_a_pull_request_shows_the_regression_in_a_short_table(project):
    """The PR recipe of reports/README.md: the machine's baseline committed (on its branch
    torchgate/<machine>) while params.yaml there names another machine, then a pull request
    whose run REGRESSED: `dvc metrics diff torchgate/<machine> --targets
    reports/<machine>/metrics.json --md` is a table of a few rows that shows it."""
    def committed(slower: float, message: str, machine: str):
        now, _, compare = run({**NOW, "slower": (slower, 1e-3)}, BASE)
        failures = gate_failures(compare, Gate().fail_on)
        write_text(project / "reports/test-box/metrics.json", json.dumps(decisions(
            compare, failures), indent=2))
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
        params["machine"] = {"name": machine, "derived": False}
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        git("add", "-A", cwd=project)
        git("commit", "-qm", message, cwd=project)

    committed(1e-3, "baseline", "somebody-else")
    git("branch", "-M", "torchgate/test-box", cwd=project)
    git("checkout", "-qb", "slower", cwd=project)
    committed(1.3e-3, "slower", "test-box")
    shown = dvc("metrics", "diff", "torchgate/test-box", "--targets",
                "reports/test-box/metrics.json", "--md")
    rows = [line for line in shown.stdout.splitlines() if line.startswith("| reports")]
    assert 3 <= len(rows) <= 40, shown.stdout
    gate = next(r for r in rows if "| gate_failed " in r)
    assert [c.strip() for c in gate.split("|")[3:6]] == ["0", "1", "1"], gate
    steady = next(r for r in rows if "slower.eager.steady_change_pct" in r)
    assert re.search(r"\| \+?2\d\.\d+|\| 3\d\.\d+", steady), steady


def test_the_steady_picture_keeps_every_label_inside_it(monkeypatch):
    """Long workload names squeeze the axes; no label may then run past the picture's edge."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from torchgate.render import plots
    drawn = []
    monkeypatch.setattr(plots, "png", lambda fig: drawn.append(fig) or b"")
    long = {f"loader_train[num_workers={n}]": [process(), process()] for n in (0, 2)}
    medians({**summaries(bench(long), cell="cpu-bf16"), **summaries(bench(long))})
    (fig,) = drawn
    FigureCanvasAgg(fig).draw()
    width, height = fig.bbox.width, fig.bbox.height
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    assert any("one dot per process" in t.get_text() for t in texts)
    for text in texts:
        box = text.get_window_extent()
        assert -1 <= box.x0 and box.x1 <= width + 1 and -1 <= box.y0 and box.y1 <= height + 1, \
            (text.get_text(), box, width)
