"""The apiserver paths of the cluster UI: every part checked, then quoted, and never a collection."""

from __future__ import annotations

import pytest

from trainop.ui.paths import JobRef, config_map_path, events_path, job_path, jobs_path, log_path, parse_key
from trainop.ui.source import BadKey


def test_a_job_key_names_its_job_by_namespace_kind_and_name():
    assert parse_key("team-a/PyTorchJob/mnist.v2") == JobRef("team-a", "PyTorchJob", "mnist.v2")


def test_a_jobs_path_is_that_one_job():
    assert job_path(JobRef("team-a", "PyTorchJob", "mnist")) == (
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist"
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("team-a/PyTorchJob/", "the job name is empty"),
        ("/PyTorchJob/mnist", "the namespace is empty"),
        ("team-a/PyTorchJob/a/b", "not a job key (namespace/kind/name): 'team-a/PyTorchJob/a/b'"),
        ("team-a/PyTorchJob", "not a job key (namespace/kind/name): 'team-a/PyTorchJob'"),
        ("team-a/Pod/mnist", "unknown kind 'Pod' in 'team-a/Pod/mnist': one of JAXJob, MPIJob"),
        ("Team-A/PyTorchJob/mnist", "namespace 'Team-A' is not a DNS label"),
        ("team.a/PyTorchJob/mnist", "namespace 'team.a' is not a DNS label"),
        ("team-a/PyTorchJob/..", "job name '..' is not a DNS subdomain"),
        ("team-a/PyTorchJob/mnist?watch=1", "job name 'mnist?watch=1' is not a DNS subdomain"),
        ("team-a/PyTorchJob/" + "a" * 254, "is not a DNS subdomain"),
        ("a" * 64 + "/PyTorchJob/mnist", "is not a DNS label"),
    ],
)
def test_a_key_with_an_empty_or_malformed_part_names_no_job_and_says_which(key: str, message: str):
    with pytest.raises(BadKey) as raised:
        parse_key(key)
    assert message in str(raised.value)


def test_a_job_path_is_never_built_with_an_empty_name():
    with pytest.raises(BadKey, match="the job name is empty"):
        job_path(JobRef("team-a", "PyTorchJob", ""))


def test_a_collection_of_jobs_is_of_a_known_kind_in_a_checked_namespace():
    assert jobs_path("team-a", "TFJob", {"dryRun": "All"}) == (
        "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs?dryRun=All"
    )
    with pytest.raises(BadKey, match="unknown kind 'Secret'"):
        jobs_path("team-a", "Secret")
    with pytest.raises(BadKey, match="namespace 'x/y' is not a DNS label"):
        jobs_path("x/y", "TFJob")


def test_a_log_path_checks_the_pod_and_container_and_quotes_its_query():
    assert log_path("team-a", "mnist-worker-0", "pytorch", {"tailLines": 5}) == (
        "/api/v1/namespaces/team-a/pods/mnist-worker-0/log?container=pytorch&tailLines=5"
    )
    with pytest.raises(BadKey, match="container 'py torch' is not a DNS label"):
        log_path("team-a", "mnist-worker-0", "py torch", {})
    with pytest.raises(BadKey, match="the pod name is empty"):
        log_path("team-a", "", "pytorch", {})


def test_an_events_field_selector_is_url_encoded():
    assert events_path("team-a", {"fieldSelector": "involvedObject.name=a,involvedObject.uid=u"}) == (
        "/api/v1/namespaces/team-a/events?fieldSelector=involvedObject.name%3Da%2CinvolvedObject.uid%3Du"
    )


def test_a_configmap_path_names_one_configmap():
    with pytest.raises(BadKey, match="the ConfigMap name is empty"):
        config_map_path("team-a", "")
