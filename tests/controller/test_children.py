"""Children of a new job: names, labels, Services, restart policies, init containers.

The rules: docs/design.md#children-per-kind and the sections after it.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.builders import container, job, replica, with_spec
from tests.controller.fakes import Cluster, by_name, desired, labels, names, pods_by_name
from trainop.api import constants as c
from trainop.frameworks.mpi import MPI, MPIJOB
from trainop.job.context import JobContext
from trainop.job.settings import Settings

OPERATOR = c.LABEL_OPERATOR_NAME
JOB = c.LABEL_JOB_NAME
TYPE = c.LABEL_REPLICA_TYPE
INDEX = c.LABEL_REPLICA_INDEX
ROLE = c.LABEL_JOB_ROLE

# kind, job, expected pod names, pods carrying job-role=master
INVENTORY = [
    (
        "TFJob",
        job("TFJob", name="j", Chief=1, PS=2, Worker=2, Evaluator=1),
        ["j-chief-0", "j-evaluator-0", "j-ps-0", "j-ps-1", "j-worker-0", "j-worker-1"],
        ["j-chief-0"],
    ),
    ("TFJob", job("TFJob", name="j", Master=1, Worker=1), ["j-master-0", "j-worker-0"], ["j-master-0"]),
    ("TFJob", job("TFJob", name="j", PS=1, Worker=2), ["j-ps-0", "j-worker-0", "j-worker-1"], ["j-worker-0"]),
    (
        "PyTorchJob",
        job("PyTorchJob", name="j", Master=1, Worker=2),
        ["j-master-0", "j-worker-0", "j-worker-1"],
        ["j-master-0"],
    ),
    (
        "PyTorchJob",
        job("PyTorchJob", name="j", Worker=3),
        ["j-worker-0", "j-worker-1", "j-worker-2"],
        ["j-worker-0"],
    ),
    (
        "XGBoostJob",
        job("XGBoostJob", name="j", Master=1, Worker=2),
        ["j-master-0", "j-worker-0", "j-worker-1"],
        ["j-master-0"],
    ),
    (
        "PaddleJob",
        job("PaddleJob", name="j", Master=1, Worker=2),
        ["j-master-0", "j-worker-0", "j-worker-1"],
        ["j-master-0"],
    ),
    ("PaddleJob", job("PaddleJob", name="j", Worker=2), ["j-worker-0", "j-worker-1"], []),
    ("JAXJob", job("JAXJob", name="j", Worker=3), ["j-worker-0", "j-worker-1", "j-worker-2"], ["j-worker-0"]),
    (
        "MXJob",
        job("MXJob", name="j", Scheduler=1, Server=1, Worker=2),
        ["j-scheduler-0", "j-server-0", "j-worker-0", "j-worker-1"],
        ["j-scheduler-0"],
    ),
    (
        "MPIJob",
        job("MPIJob", name="j", Launcher=1, Worker=2),
        ["j-launcher", "j-worker-0", "j-worker-1"],
        ["j-launcher"],
    ),
]
CONTROLLERS = {
    "TFJob": "tfjob-controller",
    "PyTorchJob": "pytorchjob-controller",
    "XGBoostJob": "xgboostjob-controller",
    "PaddleJob": "paddlejob-controller",
    "JAXJob": "jaxjob-controller",
    "MXJob": "mxjob-controller",
    "MPIJob": "mpijob-controller",
}
IDS = [f"{k}-{'-'.join(p[len('j-') :] for p in pods)}" for k, _, pods, _ in INVENTORY]


@pytest.mark.parametrize(("kind", "spec", "pods", "masters"), INVENTORY, ids=IDS)
def test_one_pod_per_replica_named_job_type_index(kind, spec, pods, masters):
    assert names(desired(spec), "Pod") == pods


@pytest.mark.parametrize(("kind", "spec", "pods", "masters"), INVENTORY, ids=IDS)
def test_one_headless_service_per_pod_except_mpi(kind, spec, pods, masters):
    services = by_name(desired(spec), "Service")
    if kind == "MPIJob":
        assert services == {}
    else:
        assert sorted(services) == pods
        assert all(s["spec"]["clusterIP"] == "None" for s in services.values())


@pytest.mark.parametrize(("kind", "spec", "pods", "masters"), INVENTORY, ids=IDS)
def test_job_role_master_is_on_the_kinds_master_pods_only(kind, spec, pods, masters):
    found = sorted(n for n, p in pods_by_name(spec).items() if labels(p).get(ROLE) == "master")
    assert found == masters


@pytest.mark.parametrize(("kind", "spec", "pods", "masters"), INVENTORY, ids=IDS)
def test_pod_labels_are_operator_job_type_and_index(kind, spec, pods, masters):
    for name, pod in pods_by_name(spec).items():
        rtype, _, index = name[len("j-") :].partition("-")
        expected = {OPERATOR: CONTROLLERS[kind], JOB: "j", TYPE: rtype}
        if index:
            expected[INDEX] = index
        if name in masters:
            expected[ROLE] = "master"
        assert labels(pod) == expected, name


def test_mpi_launcher_has_no_replica_index_label():
    pods = pods_by_name(job("MPIJob", name="j", Launcher=1, Worker=1))
    assert INDEX not in pods["j-launcher"]["metadata"]["labels"]
    assert pods["j-worker-0"]["metadata"]["labels"][INDEX] == "0"


def test_template_labels_are_kept_and_operator_labels_win_on_clash():
    worker = replica("PyTorchJob", 1)
    worker["template"]["metadata"] = {
        "labels": {"team": "ml", JOB: "spoofed"},
        "annotations": {"sidecar.istio.io/inject": "false"},
    }
    pod = pods_by_name(job("PyTorchJob", name="j", Worker=worker))["j-worker-0"]
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert pod["metadata"]["labels"][JOB] == "j"
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}


def test_pods_and_services_live_in_the_jobs_namespace():
    children = desired(job("JAXJob", name="j", namespace="team-a", Worker=2))
    assert {o["metadata"]["namespace"] for o in children} == {"team-a"}


def test_service_selects_exactly_its_pods_four_labels():
    children = desired(job("PyTorchJob", name="j", Master=1, Worker=1))
    svc = by_name(children, "Service")["j-worker-0"]
    assert svc["spec"]["selector"] == {
        OPERATOR: "pytorchjob-controller",
        JOB: "j",
        TYPE: "worker",
        INDEX: "0",
    }
    assert labels(svc) == svc["spec"]["selector"]


def test_service_ports_are_the_default_containers_ports_only():
    main = container(
        "tensorflow",
        ports=[{"name": "tfjob-port", "containerPort": 3000}, {"name": "tb", "containerPort": 6006}],
    )
    sidecar = container("proxy", ports=[{"name": "proxy", "containerPort": 15000}])
    spec = job("TFJob", name="j", Worker=replica("TFJob", 2, [main, sidecar]))
    svc = by_name(desired(spec), "Service")["j-worker-1"]
    assert svc["spec"]["ports"] == [{"name": "tfjob-port", "port": 3000}, {"name": "tb", "port": 6006}]


def test_default_port_is_added_to_the_default_container():
    pod = pods_by_name(job("XGBoostJob", name="j", Master=1))["j-master-0"]
    assert pod["spec"]["containers"][0]["ports"] == [{"name": "xgboostjob-port", "containerPort": 9999}]


@pytest.mark.parametrize(
    ("policy", "pod_policy"),
    [("Always", "Always"), ("OnFailure", "OnFailure"), ("Never", "Never"), ("ExitCode", "Never")],
)
def test_pod_restart_policy_comes_from_the_replica_spec_and_exit_code_means_never(policy, pod_policy):
    worker = replica("JAXJob", 1, restartPolicy=policy)
    worker["template"]["spec"]["restartPolicy"] = "Always"  # ignored, as in Kubeflow
    pod = pods_by_name(job("JAXJob", name="j", Worker=worker))["j-worker-0"]
    assert pod["spec"]["restartPolicy"] == pod_policy


@pytest.mark.parametrize(
    ("kind", "default"),
    [
        ("TFJob", "Never"),
        ("PyTorchJob", "OnFailure"),
        ("XGBoostJob", "Never"),
        ("PaddleJob", "OnFailure"),
        ("JAXJob", "Never"),
        ("MXJob", "Never"),
        ("MPIJob", "Never"),
    ],
)
def test_pod_restart_policy_defaults_per_kind(kind, default):
    rtype = {"XGBoostJob": "Master", "MPIJob": "Launcher"}.get(kind, "Worker")
    pods = pods_by_name(job(kind, name="j", **{rtype: 1}))
    assert {p["spec"]["restartPolicy"] for p in pods.values()} == {default}


@pytest.mark.parametrize(
    "spec",
    [
        job("TFJob", name="j", PS=0, Worker=0),
        job("PyTorchJob", name="j", Master=1),
        job("JAXJob", name="j", Worker=0),
        job("PaddleJob", name="j", Worker=0),
        job("MXJob", name="j", Server=0, Worker=0),
    ],
    ids=["tf", "pytorch-master-only", "jax", "paddle", "mxnet"],
)
def test_replicas_zero_creates_no_pod_and_no_service_for_that_type(spec):
    children = desired(spec)
    assert all("-worker-" not in o["metadata"]["name"] for o in children)
    assert all(
        "-ps-" not in o["metadata"]["name"] and "-server-" not in o["metadata"]["name"] for o in children
    )


def test_replicas_zero_everywhere_is_a_job_with_no_children_that_never_loops():
    cluster = Cluster(job("JAXJob", name="j", Worker=0))
    first = cluster.sync()
    assert first.children == []
    assert cluster.converge().response() == first.response()


def test_mpi_with_zero_workers_still_gets_launcher_and_its_config():
    children = desired(job("MPIJob", name="j", Launcher=1, Worker=0))
    assert names(children, "Pod") == ["j-launcher"]
    config = by_name(children, "ConfigMap")["j-config"]
    assert config["data"]["hostfile"] == ""
    role = by_name(children, "Role")["j-launcher"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


class TestPyTorchInitContainer:
    def test_workers_wait_for_the_master_dns_name(self):
        pods = pods_by_name(job("PyTorchJob", name="j", Master=1, Worker=1))
        [init] = pods["j-worker-0"]["spec"]["initContainers"]
        assert init == {
            "name": "init-pytorch",
            "image": "alpine:3.10",
            "imagePullPolicy": "IfNotPresent",
            "resources": {
                "limits": {"cpu": "100m", "memory": "20Mi"},
                "requests": {"cpu": "50m", "memory": "10Mi"},
            },
            "command": [
                "sh",
                "-c",
                "err=1;for i in $(seq 100); do if nslookup j-master-0; then err=0 && break; fi;"
                "echo waiting for master; sleep 2; done; exit $err",
            ],
        }

    def test_master_gets_none(self):
        pods = pods_by_name(job("PyTorchJob", name="j", Master=1, Worker=1))
        assert "initContainers" not in pods["j-master-0"]["spec"]

    def test_worker_only_jobs_get_none(self):
        pods = pods_by_name(job("PyTorchJob", name="j", Worker=2))
        assert all("initContainers" not in p["spec"] for p in pods.values())

    def test_image_and_tries_come_from_settings(self):
        settings = Settings(pytorch_init_image="registry.local/busybox:1", pytorch_init_max_tries=7)
        pods = pods_by_name(job("PyTorchJob", name="j", Master=1, Worker=1), settings)
        [init] = pods["j-worker-0"]["spec"]["initContainers"]
        assert init["image"] == "registry.local/busybox:1"
        assert "$(seq 7)" in init["command"][2]

    def test_is_appended_after_the_users_init_containers(self):
        worker = replica("PyTorchJob", 1)
        worker["template"]["spec"]["initContainers"] = [container("fetch-data")]
        pods = pods_by_name(job("PyTorchJob", name="j", Master=1, Worker=worker))
        assert [i["name"] for i in pods["j-worker-0"]["spec"]["initContainers"]] == [
            "fetch-data",
            "init-pytorch",
        ]

    def test_can_be_switched_off(self):
        pods = pods_by_name(job("PyTorchJob", name="j", Master=1, Worker=1), Settings(wait_for_dns=False))
        assert "initContainers" not in pods["j-worker-0"]["spec"]


class TestMPIChildren:
    SPEC = with_spec(job("MPIJob", name="hvd", namespace="ns", Launcher=1, Worker=2), slotsPerWorker=2)

    def test_launcher_waits_for_its_service_account_which_the_first_sync_creates(self):
        cluster = Cluster(self.SPEC)
        first = cluster.sync()
        # Every pod mounts hvd-config, so they all wait for it too (trainop.job.mounts).
        assert names(first.children, "Pod") == []
        assert names(first.children, "ServiceAccount") == ["hvd-launcher"]
        assert names(first.children, "ConfigMap") == ["hvd-config"]
        assert "hvd-launcher" in names(cluster.sync().children, "Pod")

    def test_launcher_gets_kubectl_delivery_init_container(self):
        launcher = pods_by_name(self.SPEC)["hvd-launcher"]
        assert launcher["spec"]["initContainers"] == [
            {
                "name": "kubectl-delivery",
                "image": "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest",
                "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "TARGET_DIR", "value": "/opt/kube"}, {"name": "NAMESPACE", "value": "ns"}],
                "volumeMounts": [
                    {"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
                    {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                ],
                "resources": {
                    "limits": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
                    "requests": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
                },
            }
        ]

    def test_kubectl_delivery_image_comes_from_settings(self):
        launcher = pods_by_name(self.SPEC, Settings(mpi_kubectl_delivery_image="me/kd:1"))["hvd-launcher"]
        assert launcher["spec"]["initContainers"][0]["image"] == "me/kd:1"

    def test_launcher_mounts_kubectl_and_the_config_map(self):
        spec = pods_by_name(self.SPEC)["hvd-launcher"]["spec"]
        assert spec["serviceAccountName"] == "hvd-launcher"
        assert spec["volumes"] == [
            {"name": "mpi-job-kubectl", "emptyDir": {}},
            {
                "name": "mpi-job-config",
                "configMap": {
                    "name": "hvd-config",
                    "items": [
                        {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
                    ],
                },
            },
        ]
        assert spec["containers"][0]["volumeMounts"] == [
            {"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
            {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
        ]

    def test_launcher_service_account_from_template_names_the_rbac_subject(self):
        launcher = replica("MPIJob", 1)
        launcher["template"]["spec"]["serviceAccountName"] = "mine"
        children = desired(job("MPIJob", name="hvd", Launcher=launcher, Worker=1))
        assert (
            pods_by_name(job("MPIJob", name="hvd", Launcher=launcher, Worker=1))["hvd-launcher"]["spec"][
                "serviceAccountName"
            ]
            == "mine"
        )
        assert names(children, "ServiceAccount") == ["mine"]
        binding = by_name(children, "RoleBinding")["hvd-launcher"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mine", "namespace": "default"}]

    def test_workers_sleep_and_mount_only_kubexec(self):
        worker = pods_by_name(self.SPEC)["hvd-worker-1"]
        ctr = worker["spec"]["containers"][0]
        assert (ctr["command"], ctr["args"]) == (["sleep"], ["365d"])
        assert ctr["volumeMounts"] == [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
        assert worker["spec"]["volumes"] == [
            {
                "name": "mpi-job-config",
                "configMap": {
                    "name": "hvd-config",
                    "items": [{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}],
                },
            }
        ]
        assert "env" not in ctr

    def test_worker_command_of_the_user_is_kept(self):
        worker = replica("MPIJob", 1, [container("mpi", command=["/usr/sbin/sshd"], args=["-D"])])
        pod = pods_by_name(job("MPIJob", name="hvd", Launcher=1, Worker=worker))["hvd-worker-0"]
        assert (pod["spec"]["containers"][0]["command"], pod["spec"]["containers"][0]["args"]) == (
            ["/usr/sbin/sshd"],
            ["-D"],
        )

    def test_mpi_containers_get_no_default_port(self):
        pods = pods_by_name(self.SPEC)
        assert all("ports" not in p["spec"]["containers"][0] for p in pods.values())

    def test_rbac_objects_carry_only_the_app_label(self):
        children = desired(self.SPEC)
        for kind in ("ServiceAccount", "ConfigMap", "Role", "RoleBinding"):
            for obj in by_name(children, kind).values():
                assert obj["metadata"]["labels"] == {"app": "hvd"}, kind
                assert obj["metadata"]["namespace"] == "ns"

    def test_role_allows_exec_into_exactly_the_workers_the_job_controls(self):
        role = by_name(desired(self.SPEC), "Role")["hvd-launcher"]
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {
                "apiGroups": [""],
                "resources": ["pods/exec"],
                "verbs": ["create"],
                "resourceNames": ["hvd-worker-0", "hvd-worker-1"],
            },
        ]
        binding = by_name(desired(self.SPEC), "RoleBinding")["hvd-launcher"]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "hvd-launcher",
        }

    def test_role_grants_no_exec_before_the_workers_exist(self):
        role = by_name(Cluster(self.SPEC).sync().children, "Role")["hvd-launcher"]
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        ]

    def test_role_names_each_worker_in_the_sync_after_it_is_created(self):
        cluster = Cluster(self.SPEC)
        cluster.sync()  # the ServiceAccount and hvd-config, which the pods wait for
        cluster.sync()  # the pods
        role = by_name(cluster.sync().children, "Role")["hvd-launcher"]
        assert role["rules"][1]["resourceNames"] == ["hvd-worker-0", "hvd-worker-1"]
        assert "hvd-launcher" in cluster.updated

    def test_an_mpijob_named_like_another_jobs_workers_gets_no_exec_on_their_pods(self):
        """A PyTorchJob `bar` owns `bar-worker-0`; an MPIJob `bar` in the same namespace computes that
        name for its own worker 0 (whose create then fails) and must not get exec rights on it."""
        mpi = job("MPIJob", name="bar", namespace="ns", Launcher=1, Worker=2)
        cluster = Cluster(mpi)
        foreign = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "bar-worker-0",
                "namespace": "ns",
                "uid": "pytorch-pod-uid",
                "labels": {JOB: "bar", TYPE: "worker", INDEX: "0"},
                "ownerReferences": [
                    {
                        "apiVersion": "kubeflow.org/v1",
                        "kind": "PyTorchJob",
                        "name": "bar",
                        "uid": "pytorch-uid",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {"containers": [container("pytorch")]},
            "status": {"phase": "Running"},
        }
        cluster.objects["Pod.v1"]["bar-worker-0"] = foreign
        cluster.converge()
        cluster.run("bar-worker-1", "bar-launcher")
        role = by_name(cluster.converge().children, "Role")["bar-launcher"]
        exec_rules = [r for r in role["rules"] if "pods/exec" in r["resources"]]
        assert exec_rules == [
            {
                "apiGroups": [""],
                "resources": ["pods/exec"],
                "verbs": ["create"],
                "resourceNames": ["bar-worker-1"],
            }
        ]

    def test_a_worker_without_a_controller_reference_to_the_job_gets_no_exec(self):
        cluster = Cluster(self.SPEC)
        cluster.converge()
        del cluster.pod("hvd-worker-1")["metadata"]["ownerReferences"]
        role = by_name(cluster.sync().children, "Role")["hvd-launcher"]
        assert role["rules"][1]["resourceNames"] == ["hvd-worker-0"]

    def test_kubexec_names_the_main_container_when_set(self):
        spec = with_spec(self.SPEC, mainContainer="trainer")
        data = by_name(desired(spec), "ConfigMap")["hvd-config"]["data"]
        assert data["kubexec.sh"] == (
            "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n"
            '/opt/kube/kubectl exec ${POD_NAME} --container trainer -- /bin/sh -c "$*"'
        )

    def test_an_mpijob_whose_main_container_bypassed_validation_fails_and_gets_no_kubexec(self):
        cluster = Cluster(with_spec(self.SPEC, mainContainer="mpi\ntouch /tmp/owned"))
        result = cluster.sync()
        assert cluster.condition("Failed")["reason"] == "MPIJobFailedValidation"
        assert "spec.mainContainer" in cluster.condition("Failed")["message"]
        assert result.children == []

    def test_kubexec_passes_a_main_container_with_shell_syntax_as_one_argument(self, tmp_path):
        """kubexec.sh of a job that bypassed validation, run with a kubectl that records its arguments."""
        owned = tmp_path / "owned"
        main = f"mpi\ntouch {owned}; x"
        script = MPI().kubexec(JobContext(MPIJOB, with_spec(self.SPEC, mainContainer=main), Settings()))
        kubectl = tmp_path / "kubectl"
        kubectl.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done\n')
        kubectl.chmod(0o755)
        kubexec = tmp_path / "kubexec.sh"
        kubexec.write_text(script.replace("/opt/kube/kubectl", str(kubectl)))
        out = subprocess.run(["/bin/sh", str(kubexec), "w-0", "hostname"], capture_output=True, check=True)
        assert out.stdout.split(b"\0")[:-1] == [
            *(b"exec", b"w-0", b"--container", main.encode(), b"--", b"/bin/sh", b"-c", b"hostname"),
        ]
        assert not owned.exists()

    def test_gpu_launcher_is_in_the_hostfile_and_keeps_nvidia_variables(self):
        launcher = replica("MPIJob", 1, [container("mpi", resources={"limits": {"nvidia.com/gpu": 1}})])
        spec = with_spec(job("MPIJob", name="hvd", Launcher=launcher, Worker=1), slotsPerWorker=4)
        cluster = Cluster(spec)
        cluster.sync()
        cluster.sync()  # the pods, once hvd-config and the ServiceAccount exist
        cluster.run()
        data = by_name(cluster.sync().children, "ConfigMap")["hvd-config"]["data"]
        assert data["hostfile"] == "hvd-launcher slots=4\nhvd-worker-0 slots=4\n"
        # Kubeflow's bytes: a blank line after the launcher's entry, no trailing newline.
        assert data["discover_hosts.sh"] == "#!/bin/sh\necho hvd-launcher:4\n\necho hvd-worker-0:4"
        env = {e["name"] for e in cluster.pod("hvd-launcher")["spec"]["containers"][0]["env"]}
        assert not env & {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
