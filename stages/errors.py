"""One exception type for input the user must fix; entry points print it as one line."""
import sys
from contextlib import contextmanager


class UserError(Exception):
    """Bad configuration, a missing or corrupt file, an unknown option: say what to fix."""


@contextmanager
def one_line_errors(stage: str):
    """Turn a UserError into `torchgate <stage>: error: <message>` and exit status 2."""
    try:
        yield
    except UserError as exc:
        print(f"torchgate {stage}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
