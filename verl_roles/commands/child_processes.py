"""The processes ``verl-roles launch`` starts (the probe of verl's Python, verl's checks, the trainer):
each in a process group of its own, ended with everything it started when launch gives up on it, is
interrupted, or is killed outright."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def finish_within(process: subprocess.Popen[str], seconds: float) -> tuple[str, str] | None:
    """``process``'s (stdout, stderr) once it ends; None when it did not end within ``seconds`` (then it
    and its process group are killed). Ctrl-C kills them too, then goes on up."""
    try:
        return process.communicate(timeout=seconds)
    except BaseException as error:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        if not isinstance(error, subprocess.TimeoutExpired):
            raise
        return None


def ends_with(parent: int):  # noqa: ANN202 - a preexec function
    """What a process launch starts (verl's checks, the trainer) runs before it starts: Linux sends it
    SIGTERM when launch ends, also when launch is killed outright (SIGKILL runs no handler that could
    forward a signal). Elsewhere the process outlives a killed launch."""

    def arrange() -> None:
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # launch ended before the request was made
            os.kill(os.getpid(), signal.SIGKILL)

    return arrange
