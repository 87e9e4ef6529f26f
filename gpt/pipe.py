"""A command whose reader stops early (`python -m gpt report ... | head`) or whose user presses Ctrl-C: end quietly, as
other command-line tools do, instead of a BrokenPipeError or KeyboardInterrupt traceback."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run a command's main and exit with its status; 1 when stdout's reader has gone, 130 (the shell's status for
    SIGINT) on Ctrl-C."""
    try:
        status = main()
        sys.stdout.flush()  # here, where a closed pipe can be caught, not in the interpreter's exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the flush at exit raises it again
        status = 1
    except KeyboardInterrupt:  # the user's own stop: what each command leaves behind is its own (prepare's, nothing)
        print("interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)
