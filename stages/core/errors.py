"""One exception type for input the user must fix; entry points print it as one line."""
import signal
import sys
from contextlib import contextmanager

from torchgate.core.lifetime import die_with_dvc

# A failure's message as a record keeps it: a line, not a dump (a dispatcher's message for a
# custom op without a kernel runs to 5,000 characters), and the tail of its traceback.
MESSAGE_CHARS = 500
TRACEBACK_CHARS = 2000


def clip(message: str) -> str:
    return message[:MESSAGE_CHARS]


class UserError(Exception):
    """Bad configuration, a missing or corrupt file, an unknown option: say what to fix."""


@contextmanager
def one_line_errors(stage: str):
    """Turn a UserError into `torchgate <stage>: error: <message>` and exit status 2.

    SIGTERM and SIGHUP (a closed terminal or ssh session) become an ordinary exit, so that
    cleanup runs (worker process groups are killed, temporary files removed) and no
    half-written report is left: reports are written whole or not at all. Under nohup
    (SIGHUP ignored) a hang-up stays ignored. A stage run by DVC also ends when DVC does.
    """
    ours = [signal.SIGTERM] + ([signal.SIGHUP] if signal.getsignal(signal.SIGHUP)
                               is not signal.SIG_IGN else [])

    def leave(signum, frame):
        for each in ours:       # once: a second signal must not cut the cleanup short
            signal.signal(each, signal.SIG_IGN)
        sys.exit(128 + signum)

    for each in ours:
        signal.signal(each, leave)
    die_with_dvc()
    try:
        yield
    except UserError as exc:
        print(f"torchgate {stage}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
