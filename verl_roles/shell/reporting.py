"""The one error boundary of every entry point: what reaches the user when something goes wrong.

- a user mistake (our :class:`ConfigError`, or a Hydra / OmegaConf / YAML error) is one paragraph on
  stderr and exit code 2;
- anything else is a bug of verl_roles: one paragraph saying so (exit code 70, ``EX_SOFTWARE``), never
  a bare traceback;
- Ctrl-C, SIGTERM and SIGHUP end the command with the shell's code for the signal (130, 143, 129) and
  one line; what the command was writing has been removed by then (:mod:`verl_roles.runs.write_protocol`).

``--debug`` (or ``VERL_ROLES_DEBUG=1`` / ``HYDRA_FULL_ERROR=1``, which verl's own launch scripts export)
adds the traceback before that paragraph; it never changes the paragraph or the exit code, so a script
reads the same verdict whatever its environment (for ``diff``, 1 means "the configs differ").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator

import yaml
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from verl_roles.base.errors import (
    EXIT_INTERRUPTED,
    ConfigError,
    Problem,
    caused_by_interrupt,
    current_folder_problem,
    internal_error,
    one_paragraph,
    shown,
)
from verl_roles.base.notices import ConfigWarning
from verl_roles.runs.write_protocol import Interrupted

EXIT_CONFIG_ERROR = 2
EXIT_INTERNAL_ERROR = 70
DEBUG_FLAG = "--debug"


def debug_requested(args: list[str]) -> bool:
    """True when the user asked to see tracebacks; removes ``--debug`` from ``args``."""
    asked = DEBUG_FLAG in args
    while DEBUG_FLAG in args:
        args.remove(DEBUG_FLAG)
    env = any(os.environ.get(name, "") not in ("", "0") for name in ("VERL_ROLES_DEBUG", "HYDRA_FULL_ERROR"))
    return asked or env


def _warning_shower() -> Callable[..., None]:
    """What shows a warning while a command runs: ours as one ``verl_roles warning:`` line, each message
    once per command (the same notice reached from two steps, say the deprecated config name read before
    planning and again when the run is rendered, is one notice), a library's as Python words it."""
    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        if not issubclass(category, ConfigWarning):
            print(warnings.formatwarning(message, category, filename, lineno, line), end="", file=sys.stderr)
        elif str(message) not in said:
            said.add(str(message))
            print(f"verl_roles warning: {message}", file=sys.stderr)

    return show


@contextlib.contextmanager
def recorded_warnings() -> Iterator[list[str]]:
    """Within: each warning of ours shown (as the boundary shows it) is also kept, once, in the list
    yielded: what a run said, for its own folder."""
    said: list[str] = []
    show = warnings.showwarning

    def note(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        if issubclass(category, ConfigWarning) and str(message) not in said:
            said.append(str(message))
        show(message, category, filename, lineno, file, line)

    warnings.showwarning = note
    try:
        yield said
    finally:
        warnings.showwarning = show


def report(error: BaseException) -> str:
    """The text shown for ``error``: ours as written, a library's folded into one paragraph."""
    if isinstance(error, ConfigError):
        return error.render()
    return one_paragraph(str(error))


# A reader that went away (`| head`) ends the command as it ends `yes | head` or `cat big | head`: quietly,
# with the shell's code for SIGPIPE. The reader chose to stop reading; there is nothing to explain to it,
# and a paragraph on stderr in the middle of a pipeline would be noise.
EXIT_BROKEN_PIPE = 141


class OutputFailed(ConfigError):
    """Standard output cannot take what the command prints (a full disk, a closed descriptor). A
    :class:`ConfigError`, so every layer between a print and the boundary (Hydra's run loop included) lets
    it through as it is: exit 2 and its paragraph, whichever code printed."""


class ReaderGone(OutputFailed):
    """The reader of the pipe on standard output went away (``| head``): the command stops quietly."""


def _output_failure(error: OSError) -> OutputFailed:
    reason = os.strerror(error.errno) if error.errno else str(error)
    problem = Problem(
        key="standard output",
        message=f"could not be written ({reason}), so what the command prints was lost",
        fix="send it where it can be written (`> out.txt` on a disk with room), or `> /dev/null` to keep "
        "only the files a run writes")
    return (ReaderGone if error.errno == errno.EPIPE else OutputFailed)([problem])


class _GuardedStream:
    """``sys.stdout`` (or ``sys.stderr``) while a command runs. Whatever code prints (ours, Hydra's, a
    plugin's), the text is :func:`shown` (line breaks and tabs kept): a terminal escape sequence or a
    control character of the user's text never reaches the terminal raw. On stdout, a write or flush the
    stream refuses raises :class:`OutputFailed` (or :class:`ReaderGone`) instead of the bare ``OSError``,
    which no layer would know to be about the output rather than a bug. On stderr (``2>/dev/full``, a
    reader of it gone), what cannot be written is dropped and stderr is pointed at /dev/null: the messages
    are lost, the command's outcome and exit code are not (they are what a script reads)."""

    def __init__(self, stream: object, *, output: bool) -> None:
        self._stream = stream
        self._output = output

    def write(self, text: str) -> int:
        try:
            self._stream.write(shown(text, keep="\n\t"))
        except OSError as error:
            if not self._output:
                _silence(self._stream)
                return len(text)
            raise _output_failure(error) from error
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            if not self._output:
                _silence(self._stream)
                return
            raise _output_failure(error) from error

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def say(text: str, file: object = None) -> None:
    """Print ``text`` (to stdout unless ``file``), where a reader that went away (``| head``) never stops
    the command: what it writes to files matters more than what it shows. A stdout that cannot be written
    otherwise (a full disk) is :class:`OutputFailed`."""
    try:
        print(text, file=file if file is not None else sys.stdout, flush=True)
    except (ReaderGone, BrokenPipeError, ValueError, AttributeError):
        _silence_stdout()
    except OSError as error:
        raise _output_failure(error) from error


def _silence_stdout() -> None:
    """Point the process's stdout at /dev/null: a closed pipe is not reported again at exit."""
    _silence(sys.stdout)


def _silence(stream: object) -> None:
    """Point ``stream``'s descriptor at /dev/null and drop what it still buffers: what could not be written
    is not written again (and fails again) when the interpreter exits."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())  # type: ignore[attr-defined]
        os.close(devnull)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stream.flush()  # type: ignore[attr-defined]


def _tolerant_streams() -> None:
    """Text a stream's encoding cannot hold (a non-ASCII path on an ASCII terminal) is escaped, not an
    error; a log line that cannot be written (its reader went away) is dropped, not a traceback."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")
    logging.raiseExceptions = False


def _interrupted() -> int:
    print("verl_roles: interrupted (Ctrl-C); what this run was writing was removed", file=sys.stderr)
    return EXIT_INTERRUPTED


def run_reporting_errors(action: Callable[[], object], args: list[str]) -> int:
    """Run ``action``; turn a user mistake into a message on stderr and exit code 2 (see the module
    docstring for everything else)."""
    debug = debug_requested(args)
    _tolerant_streams()
    if sys.stdout is None:
        print("verl_roles error: standard output is closed (>&-), and the commands print to it. Fix: send "
              "it somewhere (> out.txt, or > /dev/null to keep only the files a run writes).",
              file=sys.stderr)
        return EXIT_CONFIG_ERROR
    gone = current_folder_problem()
    if gone is not None:
        print(f"verl_roles error: {ConfigError([gone]).render()}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = _GuardedStream(stdout, output=True)
    sys.stderr = _GuardedStream(stderr, output=False) if stderr is not None else stderr
    try:
        return _run(action, debug)
    finally:
        if isinstance(sys.stdout, _GuardedStream):
            sys.stdout = stdout
        if isinstance(sys.stderr, _GuardedStream):
            sys.stderr = stderr


def _run(action: Callable[[], object], debug: bool) -> int:
    try:
        # catch_warnings puts the caller's filters and showwarning back on the way out.
        with warnings.catch_warnings():
            warnings.simplefilter("default", ConfigWarning)
            warnings.showwarning = _warning_shower()
            action()
            # What is still buffered fails here, inside the boundary, not at the interpreter's exit.
            sys.stdout.flush()
    except (ReaderGone, BrokenPipeError):
        # The reader of stdout went away (`| head`): stop quietly, as shell tools do.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (ConfigError, HydraException, OmegaConfBaseException, yaml.YAMLError) as error:
        _traceback_if(debug)
        if caused_by_interrupt(error):
            return _interrupted()
        if isinstance(error, OutputFailed):
            # What is left in the buffer would fail again when the interpreter exits.
            _silence_stdout()
        print(f"verl_roles error: {report(error)}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except KeyboardInterrupt:
        _traceback_if(debug)
        return _interrupted()
    except Interrupted as stop:
        print("verl_roles: stopped by a signal; what this run was writing was removed", file=sys.stderr)
        return int(stop.code) if isinstance(stop.code, int) else EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - the boundary: a bug is one paragraph, not a traceback
        _traceback_if(debug)
        if caused_by_interrupt(error):
            return _interrupted()
        print(f"verl_roles error: {ConfigError([internal_error(error)]).render()}", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    return 0


def _traceback_if(debug: bool) -> None:
    """The traceback of the exception being handled, on stderr, when the user asked for it."""
    if debug:
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exc(file=sys.stderr)
