"""Virtual environments for tests that need a second interpreter."""
import subprocess
import sysconfig
import venv
from pathlib import Path


def child_venv(path: Path) -> Path:
    """A virtual environment that sees the packages of the interpreter running the tests and
    nothing else: made without the system site-packages (which hold no torch on a fresh
    machine), with a .pth file naming this environment's own. Returns its python."""
    venv.create(path, with_pip=False)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site.stdout.strip()) / "torchgate-parent.pth").write_text("\n".join(ours) + "\n")
    return python
