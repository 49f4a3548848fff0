"""One exception type for input the user must fix; entry points print it as one line."""
import signal
import sys
from contextlib import contextmanager


class UserError(Exception):
    """Bad configuration, a missing or corrupt file, an unknown option: say what to fix."""


@contextmanager
def one_line_errors(stage: str):
    """Turn a UserError into `torchgate <stage>: error: <message>` and exit status 2.

    SIGTERM becomes an ordinary exit, so that cleanup runs (worker processes are killed,
    temporary files removed) and no half-written report is left: reports are written whole
    or not at all.
    """
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    except UserError as exc:
        print(f"torchgate {stage}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
