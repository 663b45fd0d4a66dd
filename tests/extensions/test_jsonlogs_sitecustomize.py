"""The JSON-logs sitecustomize, run as the cluster runs it: mounted into a folder that is first on
PYTHONPATH of a real Python process (docs/json-logs.md). Each test is a small program and what it
writes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainop.extensions.jsonlogs import MODULE, sitecustomize_source
from trainop.jsontypes import Json

IDENTITY = {
    "TRAINOP_JOB_NAME": "mnist",
    "TRAINOP_NAMESPACE": "team-a",
    "TRAINOP_POD_NAME": "mnist-worker-1",
    "TRAINOP_NODE_NAME": "node-3",
    "TRAINOP_REPLICA_TYPE": "worker",
    "TRAINOP_REPLICA_INDEX": "1",
}
FIELDS = {
    "job": "mnist",
    "namespace": "team-a",
    "pod": "mnist-worker-1",
    "node": "node-3",
    "replica_type": "worker",
    "replica_index": 1,
}


@pytest.fixture
def mounted(tmp_path: Path) -> Path:
    """The ConfigMap's folder, holding exactly what the operator ships."""
    folder = tmp_path / "jsonlogs"
    folder.mkdir()
    (folder / MODULE).write_text(sitecustomize_source())
    return folder


def run(
    mounted: Path,
    program: str,
    *,
    path: tuple[Path, ...] = (),
    flags: tuple[str, ...] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    script = mounted.parent / "program.py"
    script.write_text(textwrap.dedent(program))
    pythonpath = ":".join(str(p) for p in [mounted, *path])
    return subprocess.run(
        [sys.executable, *flags, str(script)],
        env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin", **IDENTITY, **env},
        cwd=mounted.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def records(text: str) -> list[Json]:
    """Every line as a JSON object: fails on the first line that is not one."""
    out = []
    for line in text.splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line
        out.append(record)
    return out


def test_a_log_call_with_no_configuration_is_one_record_with_the_pods_identity(mounted: Path) -> None:
    done = run(mounted, 'import logging\nlogging.getLogger("train").warning("loss %.2f", 0.5)\n')
    assert done.returncode == 0
    assert done.stdout == ""
    [record] = records(done.stderr)
    assert record.pop("time").endswith("Z")
    assert record == {"level": "WARNING", "logger": "train", "message": "loss 0.50", **FIELDS}


def test_the_programs_levels_still_decide_what_is_logged(mounted: Path) -> None:
    done = run(
        mounted, 'import logging\nlogging.getLogger("train").info("hidden by the WARNING root level")\n'
    )
    assert done.stderr == ""


def test_basic_config_keeps_its_level_and_stream_and_writes_json(mounted: Path) -> None:
    program = """
        import logging, sys
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
        logging.getLogger("train").info("epoch %d", 3, extra={"step": 120})
        logging.getLogger("train").debug("below INFO")
    """
    done = run(mounted, program)
    [record] = records(done.stdout)
    assert (record["level"], record["logger"], record["message"]) == ("INFO", "train", "epoch 3")
    assert record["extra"] == {"step": 120}
    assert done.stderr == ""


def test_module_level_logging_calls_configure_json_as_they_configure_text(mounted: Path) -> None:
    done = run(mounted, 'import logging\nlogging.error("disk full")\n')
    [record] = records(done.stderr)
    assert (record["level"], record["logger"], record["message"]) == ("ERROR", "root", "disk full")


def test_a_logged_exception_is_structured(mounted: Path) -> None:
    program = """
        import logging
        try:
            {}["missing"]
        except KeyError:
            logging.getLogger("train").exception("lookup failed")
    """
    [record] = records(run(mounted, program).stderr)
    assert record["message"] == "lookup failed"
    assert record["exception"]["type"] == "KeyError"
    assert record["exception"]["message"] == "'missing'"
    assert record["exception"]["traceback"].startswith("Traceback (most recent call last):")


def test_each_printed_line_is_one_record_stdout_at_info_stderr_at_warning(mounted: Path) -> None:
    program = """
        import sys
        print("step 1\\nstep 2")
        print("half", end="", flush=True)
        print(" and half")
        print("to stderr", file=sys.stderr)
    """
    done = run(mounted, program)
    assert [(r["level"], r["logger"], r["message"]) for r in records(done.stdout)] == [
        ("INFO", "stdout", "step 1"),
        ("INFO", "stdout", "step 2"),
        ("INFO", "stdout", "half and half"),
    ]
    [err] = records(done.stderr)
    assert (err["level"], err["logger"], err["message"]) == ("WARNING", "stderr", "to stderr")
    assert err["pod"] == "mnist-worker-1"


def test_text_in_any_script_survives_as_ascii_escaped_json(mounted: Path) -> None:
    done = run(mounted, 'print("température ✓ 学习")\n')
    assert done.stdout.isascii()
    assert [r["message"] for r in records(done.stdout)] == ["température ✓ 学习"]


def test_a_line_redrawn_with_carriage_returns_is_one_record_of_its_final_state(mounted: Path) -> None:
    done = run(
        mounted,
        'import sys\nfor p in (10, 50, 100):\n    sys.stderr.write(f"\\r{p}%")\nprint(file=sys.stderr)\n',
    )
    assert [r["message"] for r in records(done.stderr)] == ["100%"]


def test_an_unterminated_last_line_is_written_at_exit(mounted: Path) -> None:
    done = run(mounted, 'print("no newline", end="")\n')
    assert [r["message"] for r in records(done.stdout)] == ["no newline"]


def test_a_printed_json_object_passes_through_as_it_is(mounted: Path) -> None:
    done = run(mounted, 'print(\'{"event": "checkpoint", "step": 5}\')\n')
    assert done.stdout == '{"event": "checkpoint", "step": 5}\n'


def test_an_uncaught_exception_is_one_record_and_keeps_the_exit_code(mounted: Path) -> None:
    program = """
        def train():
            raise RuntimeError("NCCL timeout")
        train()
    """
    done = run(mounted, program)
    assert done.returncode == 1
    [record] = records(done.stderr)
    assert (record["level"], record["logger"]) == ("CRITICAL", "uncaught")
    assert record["message"] == "RuntimeError: NCCL timeout"
    assert record["exception"]["type"] == "RuntimeError"
    assert 'in train\n    raise RuntimeError("NCCL timeout")' in record["exception"]["traceback"]


def test_an_uncaught_exception_in_a_thread_is_one_record(mounted: Path) -> None:
    program = """
        import threading
        t = threading.Thread(target=lambda: 1 / 0, name="loader")
        t.start()
        t.join()
    """
    [record] = records(run(mounted, program).stderr)
    assert record["message"] == "in thread loader: ZeroDivisionError: division by zero"
    assert record["exception"]["type"] == "ZeroDivisionError"


def test_a_warning_is_one_record(mounted: Path) -> None:
    [record] = records(run(mounted, 'import warnings\nwarnings.warn("lr too high")\n').stderr)
    assert (record["level"], record["logger"], record["message"]) == (
        "WARNING",
        "py.warnings",
        "UserWarning: lr too high",
    )
    assert record["warning"]["lineno"] == 2


def test_rank_local_rank_and_world_size_come_from_torchrun(mounted: Path) -> None:
    done = run(mounted, 'print("hi")\n', RANK="3", LOCAL_RANK="1", WORLD_SIZE="4")
    [record] = records(done.stdout)
    assert (record["rank"], record["local_rank"], record["world_size"]) == (3, 1, 4)


def test_rank_local_rank_and_world_size_come_from_open_mpi(mounted: Path) -> None:
    env = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"}
    [record] = records(run(mounted, 'print("hi")\n', **env).stdout)
    assert (record["rank"], record["local_rank"], record["world_size"]) == (2, 0, 4)


def test_fields_that_are_not_set_are_left_out(mounted: Path) -> None:
    done = run(mounted, 'print("hi")\n', TRAINOP_REPLICA_INDEX="")
    [record] = records(done.stdout)
    assert "replica_index" not in record and "rank" not in record


def test_a_python_child_process_logs_json_too(mounted: Path) -> None:
    program = """
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "print('from the child')"], check=True)
    """
    assert [r["message"] for r in records(run(mounted, program).stdout)] == ["from the child"]


def test_a_process_forked_while_a_thread_writes_a_line_can_write_its_own(mounted: Path) -> None:
    # The thread is held inside the write, so the fork happens while it holds the module's lock.
    program = """
        import os, sys, threading
        real, entered, release = sys.stdout._real, threading.Event(), threading.Event()

        class Held:
            def write(self, text):
                entered.set()
                release.wait()
                return real.write(text)

            def flush(self):
                real.flush()

        sys.stdout._real = Held()
        threading.Thread(target=print, args=("from the thread",)).start()
        entered.wait()
        pid = os.fork()
        if pid == 0:
            sys.stdout._real = real
            print("from the child")
            os._exit(0)
        os.waitpid(pid, 0)
        release.set()
    """
    done = run(mounted, program)
    assert [r["message"] for r in records(done.stdout)] == ["from the child", "from the thread"]


# ---- a program that configured its own logging keeps it ------------------------------------------
def test_a_programs_own_handler_keeps_its_formatter(mounted: Path) -> None:
    program = """
        import logging, sys
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s|%(name)s|%(message)s"))
        log = logging.getLogger("train")
        log.addHandler(handler)
        log.warning("mine")
    """
    [record] = records(run(mounted, program).stderr)
    # Its line is what it formatted, carried as what the process wrote to stderr.
    assert (record["logger"], record["message"]) == ("stderr", "WARNING|train|mine")


def test_a_programs_own_json_logging_passes_through_unchanged(mounted: Path) -> None:
    program = """
        import json, logging, sys
        class Json(logging.Formatter):
            def format(self, record):
                return json.dumps({"msg": record.getMessage(), "severity": record.levelname})
        logging.basicConfig(handlers=[logging.StreamHandler(sys.stdout)], level=logging.INFO)
        logging.root.handlers[0].setFormatter(Json())
        logging.info("own")
    """
    assert run(mounted, program).stdout == '{"msg": "own", "severity": "INFO"}\n'


def test_a_log_file_the_program_configured_keeps_its_format(mounted: Path) -> None:
    program = """
        import logging
        logging.basicConfig(filename="train.log", format="%(levelname)s %(message)s", level=logging.INFO)
        logging.info("to the file")
    """
    done = run(mounted, program)
    assert done.stdout == done.stderr == ""
    assert (mounted.parent / "train.log").read_text() == "INFO to the file\n"


def test_an_excepthook_the_program_sets_is_its_own(mounted: Path) -> None:
    program = """
        import sys
        sys.excepthook = lambda *exc: sys.__stderr__.write("custom hook\\n")
        raise ValueError("x")
    """
    assert run(mounted, program).stderr == "custom hook\n"


# ---- the image's own sitecustomize and broken environments ---------------------------------------
def image_site(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "image-site"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(source))
    return folder


def test_the_images_own_sitecustomize_still_runs_first(mounted: Path, tmp_path: Path) -> None:
    site = image_site(tmp_path, 'import os\nos.environ["IMAGE_SITE"] = "ran"\n')
    done = run(mounted, 'import os\nprint(os.environ["IMAGE_SITE"])\n', path=(site,))
    assert [r["message"] for r in records(done.stdout)] == ["ran"]


def test_logging_the_images_sitecustomize_configured_is_kept(mounted: Path, tmp_path: Path) -> None:
    site = image_site(tmp_path, 'import logging\nlogging.basicConfig(format="image:%(message)s")\n')
    done = run(mounted, 'import logging\nlogging.warning("w")\n', path=(site,))
    [record] = records(done.stderr)
    assert (record["logger"], record["message"]) == ("stderr", "image:w")


def test_a_failing_image_sitecustomize_is_reported_as_site_reports_it(mounted: Path, tmp_path: Path) -> None:
    site = image_site(tmp_path, 'raise ImportError("no such thing")\n')
    done = run(mounted, 'print("still runs")\n', path=(site,))
    assert done.returncode == 0
    assert [r["message"] for r in records(done.stdout)] == ["still runs"]
    assert done.stderr.startswith(
        "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nImportError: no such thing\n"
    )


def test_a_broken_standard_library_leaves_the_program_untouched(mounted: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "logging.py").write_text('raise ImportError("shadowed logging")\n')
    done = run(mounted, 'print("plain")\n', path=(broken,))
    assert done.returncode == 0
    assert done.stdout == "plain\n"
    assert done.stderr == "trainop: JSON logs are off for this process: ImportError: shadowed logging\n"


def test_a_process_without_stdout_runs_as_it_would(mounted: Path) -> None:
    script = mounted.parent / "program.py"
    script.write_text('import sys, logging\nassert sys.stdout is None\nlogging.warning("plain")\n')
    done = subprocess.run(
        ["/bin/sh", "-c", f'exec "{sys.executable}" "{script}" 1>&-'],
        env={"PYTHONPATH": str(mounted), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "WARNING:root:plain\n")


def test_isolated_mode_ignores_pythonpath_and_so_json_logs(mounted: Path) -> None:
    assert run(mounted, 'print("plain")\n', flags=("-I",)).stdout == "plain\n"
