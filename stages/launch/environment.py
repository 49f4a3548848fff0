"""Environment capture: the environment as an arm's interpreter sees it, read by running
measure.probe there (it needs only torch), on whichever machine runs that arm's units."""
from __future__ import annotations

import json
import subprocess

from stages.launch.local import ROOT


def capture_env(python: str) -> dict:
    """The environment as another interpreter sees it (it needs only torch), with every
    distribution installed there: it imports none of the workloads, so which of them matter
    is this run's to say (core.records.packages.comparable)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from stages.measure.probe import capture; print(json.dumps(capture(every=True)))")
    out = subprocess.run([python, "-c", code, str(ROOT)], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"could not capture the environment of {python}: {tail}"}
    return json.loads(out.stdout.strip().splitlines()[-1])
