"""`trainop run` end to end through the CLI: exit codes, failure messages, restarts, deadlines, signals,
and no process left behind in any of those cases."""

from __future__ import annotations

import argparse
import json
import re
import signal
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.local.helpers import behave, eventually, new_tag, pids_tagged
from tests.local.runs import pod_name_env, replica, start, trainop, write_job
from trainop.admission.defaults import apply_defaults
from trainop.admission.validation import validate
from trainop.local import cli as local_cli
from trainop.local.network import LoopbackNetwork
from trainop.local.runner import EXIT_INTERRUPTED

PT = "PyTorchJob"


def stamp(value: str) -> datetime:
    return datetime.fromisoformat(value)


def hang(tag: str, *extra: str) -> list[str]:
    return behave("--sleep", "600", "--tag", tag, *extra)


def test_a_job_that_succeeds_exits_0_and_prints_conditions_and_logs(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, behave("--print", "hello from master")),
        Worker=replica(PT, ["sh", "-c", "echo rank $RANK of $WORLD_SIZE"], replicas=2),
    )
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[master-0] hello from master" in result.stdout
    assert re.search(r"^\[worker-1\] rank 2 of 3$", result.stdout, re.M)
    assert re.search(
        r"^  Succeeded  True   PyTorchJobSucceeded: PyTorchJob t is successfully completed\.$",
        result.stdout,
        re.M,
    )
    assert f"logs: {tmp_path / 'run' / 'logs'}" in result.stdout
    assert f"pages: trainop ui {tmp_path}" in result.stdout
    assert (tmp_path / "run" / "logs" / "t-master-0" / "pytorch.log").read_text() == "hello from master\n"
    assert (
        json.loads((tmp_path / "run" / "job.json").read_text())["status"]["conditions"][-1]["type"]
        == "Succeeded"
    )


def test_output_json_prints_only_the_final_job_on_stdout(tmp_path: Path) -> None:
    job = write_job(tmp_path, "XGBoostJob", Master=replica("XGBoostJob", behave("--print", "trained")))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--output", "json")
    assert result.returncode == 0, result.stderr
    final = json.loads(result.stdout)
    assert final["kind"] == "XGBoostJob" and final["metadata"]["name"] == "t"
    assert [c["type"] for c in final["status"]["conditions"] if c["status"] == "True"] == [
        "Created",
        "Succeeded",
    ]
    assert final["status"]["replicaStatuses"]["Master"] == {"succeeded": 1}
    assert "[master-0] trained" in result.stderr


def test_an_invalid_job_exits_2_with_the_message_kubectl_would_show(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, ["true"], replicas=2))
    expected = validate(apply_defaults(yaml.safe_load(job.read_text()))).message
    assert expected.startswith("spec.pytorchReplicaSpecs[Master].replicas: Forbidden")
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f'Error from server (Invalid): error when creating "{job}": admission webhook '
        f'"validator.pytorchjob.training-operator.kubeflow.org" denied the request: {expected}'
    )
    assert not (tmp_path / "run").exists()


def test_a_misspelt_field_exits_2_naming_it_as_the_apiserver_would(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, ["true"], workingdir="/tmp"))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert (
        'spec.pytorchReplicaSpecs.Master.template.spec.containers[0].workingdir: unknown field "workingdir"'
        in result.stderr
    )
    assert not (tmp_path / "run").exists()


def test_a_file_that_is_not_one_job_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = trainop(str(path))
    assert result.returncode == 2
    assert (
        "holds no job; expected one kubeflow.org/v1 job and the ConfigMaps its volumes mount" in result.stderr
    )


def test_a_pod_that_needs_a_cluster_exits_2_naming_the_field_before_anything_starts(tmp_path: Path) -> None:
    tag = new_tag()
    secret = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}}]
    job = write_job(tmp_path, PT, Master=replica(PT, hang(tag)), Worker=replica(PT, hang(tag), env=secret))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert (
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].env[0].valueFrom.secretKeyRef"
        in result.stdout
    )
    assert "master-0/pytorch started" not in result.stdout
    assert pids_tagged(tag) == []


def test_a_worker_exiting_1_fails_the_job_with_a_message_naming_the_replica(tmp_path: Path) -> None:
    tag = new_tag()
    fail_one = ["sh", "-c", f'[ "$POD_NAME" = t-worker-1 ] && exit 1; exec sleep 600 # {tag}']
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, hang(tag)),
        Worker=replica(PT, fail_one, replicas=2, env=pod_name_env()),
    )
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--grace-period", "1")
    assert result.returncode == 1, result.stdout
    assert (
        "Failed     True   PyTorchJobFailed: PyTorchJob t is failed because 1 Worker replica(s) failed."
        in result.stdout
    )
    assert re.search(r"^  worker-1 +Failed \(exit 1\) ", result.stdout, re.M)
    assert "worker-1/pytorch exited with code 1" in result.stdout
    assert pids_tagged(tag) == []


def test_exit_137_under_exit_code_recreates_the_pod_which_then_succeeds(tmp_path: Path) -> None:
    # The worker is SIGKILLed on its first run (like an OOM kill) and finishes on its second; the
    # master finishes only after the worker did, so success proves the restart happened.
    killed, done = tmp_path / "killed", tmp_path / "done"
    # `$$$$` is the shell's `$$` after Kubernetes' `$(VAR)` expansion, which turns `$$` into `$`.
    worker = ["sh", "-c", f"if [ ! -e {killed} ]; then touch {killed}; kill -9 $$$$; fi; touch {done}"]
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, behave("--wait-for", str(done))),
        Worker=replica(PT, worker, policy="ExitCode"),
    )
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), timeout=60)
    assert result.returncode == 0, result.stdout
    assert "worker-0/pytorch exited with code 137" in result.stdout
    assert "job Restarting: PyTorchJob t is restarting because 1 Worker replica(s) failed." in result.stdout
    assert "job Succeeded" in result.stdout


def test_exit_1_under_exit_code_is_permanent(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, behave("--sleep", "600")),
        Worker=replica(PT, ["false"], policy="ExitCode"),
    )
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--grace-period", "1", timeout=60)
    assert result.returncode == 1
    assert 'job "t" is failing because "Worker" replica(s) failed.' in result.stdout


def test_active_deadline_stops_a_hanging_job(tmp_path: Path) -> None:
    tag = new_tag()
    job = write_job(
        tmp_path,
        PT,
        run_policy={"activeDeadlineSeconds": 2},
        Master=replica(PT, hang(tag)),
        Worker=replica(PT, hang(tag), replicas=2),
    )
    # Were the deadline missed, the run's own --timeout would end it with 124, not 1.
    run = ("--workdir", str(tmp_path / "run"), "--grace-period", "1", "--timeout", "45")
    result = trainop(str(job), *run, timeout=90)
    assert result.returncode == 1, result.stdout
    assert "Job t has failed because it was active longer than specified deadline" in result.stdout
    status = json.loads((tmp_path / "run" / "job.json").read_text())["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert stamp(failed["lastTransitionTime"]) - stamp(status["startTime"]) >= timedelta(seconds=2)
    assert pids_tagged(tag) == []


def test_timeout_exits_124_and_stops_everything(tmp_path: Path) -> None:
    tag = new_tag()
    job = write_job(tmp_path, "JAXJob", Worker=replica("JAXJob", hang(tag, "--spawn"), replicas=2))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--timeout", "2", "--grace-period", "1")
    assert result.returncode == 124
    assert "--timeout of 2s reached" in result.stdout
    assert pids_tagged(tag) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_every_process_group_and_exits_130(tmp_path: Path, sig: signal.Signals) -> None:
    tag = new_tag()
    # Every pod also starts a grandchild, and the workers ignore SIGTERM: only SIGKILL stops them.
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, hang(tag, "--spawn")),
        Worker=replica(PT, hang(tag, "--spawn", "--ignore-term"), replicas=2),
    )
    proc = start(str(job), "--workdir", str(tmp_path / "run"), "--grace-period", "1")
    try:
        assert eventually(lambda: len(pids_tagged(tag)) == 6, timeout=30), pids_tagged(tag)
        proc.send_signal(sig)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert f"interrupted by {sig.name}" in stdout
    assert pids_tagged(tag) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_set_up_ends_the_run_before_any_pod_starts(
    tmp_path: Path, sig: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = new_tag()
    job = write_job(tmp_path, PT, Master=replica(PT, hang(tag)))
    make_network = local_cli.confined_network

    def interrupted(workdir: Path) -> LoopbackNetwork | None:
        # The signal lands while the run forks the process that makes its namespaces.
        signal.raise_signal(sig)
        return make_network(workdir)

    monkeypatch.setattr(local_cli, "confined_network", interrupted)
    parser = argparse.ArgumentParser()
    local_cli.add_arguments(parser)
    args = parser.parse_args([str(job), "--workdir", str(tmp_path / "run")])
    assert local_cli.run(args) == EXIT_INTERRUPTED
    assert pids_tagged(tag) == []
    assert "replicaStatuses" not in json.loads((tmp_path / "run" / "job.json").read_text()).get("status", {})


def test_a_suspended_job_starts_nothing_and_says_why(tmp_path: Path) -> None:
    tag = new_tag()
    job = write_job(tmp_path, PT, run_policy={"suspend": True}, Master=replica(PT, hang(tag)))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), timeout=60)
    assert result.returncode == 0
    assert "job Suspended: PyTorchJob t is suspended." in result.stdout
    assert "spec.runPolicy.suspend is true, so nothing runs" in result.stdout
    assert "started" not in result.stdout


def test_a_run_whose_reader_closes_the_pipe_stops_without_a_traceback_and_records_its_end(
    tmp_path: Path,
) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, ["sh", "-c", "while :; do echo line; sleep 0.01; done"]))
    run = start(str(job), "--workdir", str(tmp_path / "run"))
    assert run.stdout is not None and run.stderr is not None
    assert run.stdout.readline()
    run.stdout.close()  # as `| head -1` does once it has its line
    code = run.wait(timeout=120)
    stderr = run.stderr.read()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert code == EXIT_INTERRUPTED
    finished = json.loads((tmp_path / "run" / "run.json").read_text())["finished"]
    assert finished["reason"] == "interrupted by a closed pipe"
