"""The ``tensordesc`` command of the wheel: the console script ``tensordesc`` and
``python -m tensordesc`` run the command line of the native ``tensordesc`` binary (the
same Rust code, in the extension module) in this process.

The commands write to the process's standard output and error directly (file descriptors
1 and 2), as the binary does; their exit status is the process's.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import _native


def main(argv: Sequence[str] | None = None, *, prog: str | None = None) -> NoReturn:
    """Run ``tensordesc ARGS...`` and exit with its status.

    ``argv`` is the arguments without the program name (default ``sys.argv[1:]``);
    ``prog`` the name usage lines show (default: the file name of ``sys.argv[0]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if prog is None:
        prog = sys.argv[0] if sys.argv and sys.argv[0] else "tensordesc"
    # Ctrl-C stops a long command (a convert) at once, as it stops the binary: Python's own
    # handler would only set a flag, checked when the native call returns.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # A panic (a bug) prints one line, `error: INTERNAL: ...`, as the binary's does.
    _native._report_panics_as_errors()
    # Anything Python buffered goes out before the command's own output.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    # The command flushes its output before returning. A reader that closed standard
    # output early (`tensordesc inspect ... | head`) stops it quietly, with status 0; Python
    # wrote nothing to sys.stdout, so its flush at exit has nothing to fail on.
    sys.exit(_native._run_cli([prog, *args]))
