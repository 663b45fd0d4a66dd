"""One JSON object per line for everything a Python process logs or prints (docs/json-logs.md).

The operator mounts this file from a ConfigMap into every container of a job that asks for JSON logs and
puts its folder first on PYTHONPATH, so `site` imports it at start-up before the program runs. It uses
only the standard library (a training image cannot be assumed to carry anything else), and it must never
break a program: whatever fails while it sets itself up, the program runs untouched, with one line on
stderr saying JSON logs are off for it.

What it does:
* runs the `sitecustomize` it shadows (the image's own, e.g. Debian's) first, as `site` would have;
* logging with no handler anywhere (Python's "last resort") and `logging.basicConfig`'s console handler
  write JSON records; handlers a program attaches itself keep their own formatters;
* every line printed to sys.stdout / sys.stderr becomes a record (logger "stdout" / "stderr"); a line
  that already is a JSON object passes through as it is;
* an uncaught exception (main thread or any other) and a warning are one record each.
"""

from __future__ import annotations

import os
import sys

# Importing typing would be most of what this module adds to every interpreter's start-up (it is not
# otherwise imported by the modules used here); the annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

# The identity a record carries: record field -> the environment variables that may hold it, first set
# wins (the operator's, then torchrun's, then Open MPI's and MPICH's / Intel MPI's).
IDENTITY = (
    ("job", ("TRAINOP_JOB_NAME",)),
    ("namespace", ("TRAINOP_NAMESPACE",)),
    ("replica_type", ("TRAINOP_REPLICA_TYPE",)),
    ("replica_index", ("TRAINOP_REPLICA_INDEX",)),
    ("pod", ("TRAINOP_POD_NAME",)),
    ("node", ("TRAINOP_NODE_NAME",)),
    ("rank", ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")),
    ("local_rank", ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")),
    ("world_size", ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")),
)
INTEGER_FIELDS = frozenset(("replica_index", "rank", "local_rank", "world_size"))
# A partial line longer than this is emitted rather than held until its newline arrives.
MAX_PENDING = 64 * 1024
INSTALLED = "_trainop_jsonlogs_installed"
# Seconds a reading of the identity's environment variables is reused.
IDENTITY_TTL = 1.0


def _chain() -> None:
    """Run the next `sitecustomize` on sys.path, which this file shadows, as `site` would run it."""
    import importlib.machinery
    import importlib.util

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    rest = [p for p in sys.path if os.path.realpath(os.path.abspath(p or os.curdir)) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # site reports a failing sitecustomize the same way and goes on
        sys.stderr.write(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}\n"
        )


def _install() -> None:
    import _thread
    import json
    import logging
    import threading
    import time
    import traceback
    import warnings

    out, err = sys.stdout, sys.stderr
    if out is None or err is None:
        # A process started without one of its console streams (a closed descriptor) is left as it is.
        return
    lock = threading.RLock()

    def new_lock_in_child() -> None:
        # A process forked while another thread was writing (DataLoader workers fork while a progress
        # thread prints) would inherit the lock held, by a thread it does not have, and hang on its
        # first line. logging renews its own locks the same way.
        nonlocal lock
        lock = threading.RLock()

    def now() -> str:
        t = time.time()
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"

    # Reading the environment took ~80% of a record's cost; a program that sets RANK itself (after
    # mp.spawn, say) shows it in its records from at most IDENTITY_TTL later.
    cached: list[Any] = [-IDENTITY_TTL, {}]

    def identity() -> dict[str, Any]:
        if time.monotonic() - cached[0] < IDENTITY_TTL:
            return cached[1]  # type: ignore[no-any-return]
        fields: dict[str, Any] = {}
        for name, variables in IDENTITY:
            value = next((os.environ[v] for v in variables if os.environ.get(v)), None)
            if value is not None:
                fields[name] = int(value) if name in INTEGER_FIELDS and value.isdigit() else value
        cached[:] = [time.monotonic(), fields]
        return fields

    def exception(info: tuple[Any, Any, Any]) -> dict[str, Any]:
        kind, value, tb = info
        return {
            "type": getattr(kind, "__qualname__", str(kind)),
            "message": str(value),
            "traceback": "".join(traceback.format_exception(kind, value, tb)).rstrip("\n"),
        }

    # Escaped to ASCII (the default), so that a stream of any encoding can take it.
    encoder = json.JSONEncoder(default=str)

    def render(level: str, logger: str, message: str, **more: Any) -> str:
        record = {"time": now(), "level": level, "logger": logger, "message": message}
        record.update(more)
        record.update(identity())
        return encoder.encode(record) + "\n"

    def emit(stream: Any, text: str) -> None:
        with lock:
            stream.write(text)
            stream.flush()

    standard = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    class JsonFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            more: dict[str, Any] = {}
            if record.exc_info and record.exc_info[0] is not None:
                more["exception"] = exception(record.exc_info)
            elif record.exc_text:
                more["exception"] = {"traceback": record.exc_text}
            if record.stack_info:
                more["stack"] = record.stack_info
            extra = {k: v for k, v in vars(record).items() if k not in standard and not k.startswith("_")}
            if extra:
                more["extra"] = extra
            return render(record.levelname, record.name, record.getMessage(), **more).rstrip("\n")

    class JsonHandler(logging.Handler):
        """Writes to the real stderr (not the wrapper below, which would wrap the record again)."""

        def emit(self, record: logging.LogRecord) -> None:
            try:
                emit(err, self.format(record) + "\n")
            except Exception:  # logging's own contract: report and carry on
                self.handleError(record)

    formatter = JsonFormatter()

    class Lines:
        """sys.stdout / sys.stderr: each complete line written becomes one record on the real stream."""

        def __init__(self, real: Any, name: str, level: str) -> None:
            self._real, self._name, self._level, self._pending = real, name, level, ""

        def write(self, text: str) -> int:
            if not isinstance(text, str):
                raise TypeError(f"write() argument must be str, not {type(text).__name__}")
            with lock:
                self._pending += text
                if "\n" not in text and len(self._pending) <= MAX_PENDING:
                    return len(text)  # print() writes its arguments, separators and end one by one
                *complete, self._pending = self._pending.split("\n")
                if len(self._pending) > MAX_PENDING:
                    complete.append(self._pending)
                    self._pending = ""
                for one in complete:
                    self._record(one)
            return len(text)

        def _record(self, text: str) -> None:
            # What a terminal would show of a line redrawn with carriage returns (progress bars).
            text = text.rstrip("\r").rsplit("\r", 1)[-1]
            if not text:
                return
            stripped = text.strip()
            if stripped.startswith("{") and stripped.endswith("}"):
                try:
                    if isinstance(json.loads(stripped), dict):
                        emit(self._real, stripped + "\n")
                        return
                except ValueError:
                    pass
            try:
                rendered = render(self._level, self._name, text)
            except Exception:  # a line that cannot be a record is still the program's output
                rendered = text + "\n"
            emit(self._real, rendered)

        def writelines(self, lines: Any) -> None:
            for one in lines:
                self.write(one)

        def flush(self) -> None:
            with lock:
                if self._pending and sys.is_finalizing():
                    self._record(self._pending)
                    self._pending = ""
                self._real.flush()

        def finish(self) -> None:
            with lock:
                if self._pending:
                    self._record(self._pending)
                    self._pending = ""

        def isatty(self) -> bool:
            return False

        def __getattr__(self, name: str) -> Any:
            # fileno, encoding, buffer, errors, ...: the real stream's (writes to them pass unchanged).
            return getattr(self._real, name)

    stdout, stderr = Lines(out, "stdout", "INFO"), Lines(err, "stderr", "WARNING")

    def flush_pending() -> None:
        stdout.finish()
        stderr.finish()

    original_basic_config = logging.basicConfig

    def basic_config(**kwargs: Any) -> None:
        before = set(logging.root.handlers)
        original_basic_config(**kwargs)
        if "handlers" in kwargs:
            return  # the program's own handlers, formatters included
        for handler in logging.root.handlers:
            if handler in before or not isinstance(handler, logging.StreamHandler):
                continue
            target = getattr(handler, "stream", None)
            if target in (stdout, out):
                handler.setStream(out)
            elif target in (stderr, err):
                handler.setStream(err)
            else:
                continue  # a file: keep the program's format there
            handler.setFormatter(formatter)

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        flush_pending()
        emit(
            err,
            render(
                "CRITICAL", "uncaught", f"{kind.__name__}: {value}", exception=exception((kind, value, tb))
            ),
        )

    def thread_excepthook(args: Any) -> None:
        if args.exc_type is SystemExit:
            return
        flush_pending()
        name = args.thread.name if args.thread is not None else "?"
        info = (args.exc_type, args.exc_value, args.exc_traceback)
        emit(
            err,
            render(
                "CRITICAL",
                "uncaught",
                f"in thread {name}: {args.exc_type.__name__}: {args.exc_value}",
                exception=exception(info),
            ),
        )

    def showwarning(
        message: Any,
        category: Any,
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if file is not None and file not in (sys.stderr, err):
            original_showwarning(message, category, filename, lineno, file, line)
            return
        flush_pending()
        emit(
            err,
            render(
                "WARNING",
                "py.warnings",
                f"{category.__name__}: {message}",
                warning={"category": category.__name__, "filename": filename, "lineno": lineno},
            ),
        )

    import atexit

    handler = JsonHandler()
    handler.setFormatter(formatter)
    original_showwarning = warnings.showwarning
    # Hooks someone already replaced (the image's sitecustomize) are theirs to keep.
    own_excepthook = sys.excepthook is sys.__excepthook__
    # threading.__excepthook__ is Python 3.10's; before it the default was _thread's.
    default_thread_hook = getattr(threading, "__excepthook__", None) or getattr(_thread, "_excepthook", None)
    own_thread_excepthook = getattr(threading, "excepthook", None) is default_thread_hook is not None
    own_showwarning = original_showwarning is getattr(warnings, "_showwarning_orig", None)
    # Console handlers configured before us (by the image's sitecustomize) will write through the
    # wrappers too, so their lines become records like every other line.
    consoles = [
        h
        for existing in [logging.root, *logging.root.manager.loggerDict.values()]
        for h in getattr(existing, "handlers", [])
        if isinstance(h, logging.StreamHandler) and h.stream in (out, err)
    ]
    # Everything is built before anything is replaced, and nothing below can fail.
    logging.lastResort = handler
    logging.basicConfig = basic_config
    if own_excepthook:
        sys.excepthook = excepthook
    if own_thread_excepthook:
        threading.excepthook = thread_excepthook
    if own_showwarning:
        warnings.showwarning = showwarning
    sys.stdout, sys.stderr = stdout, stderr
    for configured in consoles:
        configured.stream = stdout if configured.stream is out else stderr
    atexit.register(flush_pending)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=new_lock_in_child)


def _main() -> None:
    try:
        _chain()
    except Exception as exc:  # finding the image's sitecustomize must not stop the program
        sys.stderr.write(f"trainop: could not run the image's sitecustomize: {type(exc).__name__}: {exc}\n")
    if getattr(sys, INSTALLED, False):
        return
    setattr(sys, INSTALLED, True)
    saved = (sys.stdout, sys.stderr, sys.excepthook)
    try:
        _install()
    except Exception as exc:  # any failure leaves the program as it would have run
        sys.stdout, sys.stderr, sys.excepthook = saved
        if sys.stderr is not None:
            sys.stderr.write(f"trainop: JSON logs are off for this process: {type(exc).__name__}: {exc}\n")


_main()
