"""The four worked examples of docs/design.md#worked-examples, exactly."""

from __future__ import annotations

import pytest

from tests.builders import job, with_spec
from tests.controller.fakes import STAMP0, Cluster, by_name, env_list, names, stamp

SELECTOR = (
    "training.kubeflow.org/job-name={job},training.kubeflow.org/operator-name={op},"
    "training.kubeflow.org/replica-type={t}"
)


class TestA1PyTorchMnist:
    JOB = job("PyTorchJob", name="mnist", namespace="team-a", Master=1, Worker=2)

    @pytest.fixture
    def children(self):
        return Cluster(self.JOB).sync().children

    def test_children_are_three_pods_and_three_services(self, children):
        assert names(children, "Pod") == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
        assert names(children, "Service") == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
        assert len(children) == 6

    def test_master_pod(self, children):
        master = by_name(children, "Pod")["mnist-master-0"]
        assert master["metadata"]["labels"] == {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/replica-type": "master",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/job-role": "master",
        }
        assert master["spec"]["restartPolicy"] == "OnFailure"
        [ctr] = master["spec"]["containers"]
        assert ctr["name"] == "pytorch"
        assert ctr["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
        assert "initContainers" not in master["spec"]

    @pytest.mark.parametrize("index", [0, 1])
    def test_worker_pods_wait_for_the_master(self, children, index):
        worker = by_name(children, "Pod")[f"mnist-worker-{index}"]
        assert worker["metadata"]["labels"] == {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": str(index),
        }
        [init] = worker["spec"]["initContainers"]
        assert init["name"] == "init-pytorch"
        assert "nslookup mnist-master-0;" in init["command"][2]

    @pytest.mark.parametrize("name", ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"])
    def test_services(self, children, name):
        svc = by_name(children, "Service")[name]
        pod = by_name(children, "Pod")[name]
        operator_labels = {
            k: v for k, v in pod["metadata"]["labels"].items() if k != "training.kubeflow.org/job-role"
        }
        assert svc["spec"] == {
            "clusterIP": "None",
            "selector": operator_labels,
            "ports": [{"name": "pytorchjob-port", "port": 23456}],
        }

    @pytest.mark.parametrize(
        ("name", "rank"), [("mnist-master-0", "0"), ("mnist-worker-0", "1"), ("mnist-worker-1", "2")]
    )
    def test_env(self, children, name, rank):
        pod = by_name(children, "Pod")[name]
        assert env_list(pod) == [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "MASTER_PORT", "value": "23456"},
            {"name": "PET_MASTER_PORT", "value": "23456"},
            {"name": "MASTER_ADDR", "value": "mnist-master-0"},
            {"name": "PET_MASTER_ADDR", "value": "mnist-master-0"},
            {"name": "WORLD_SIZE", "value": "3"},
            {"name": "RANK", "value": rank},
            {"name": "PET_NODE_RANK", "value": rank},
            {"name": "PET_NPROC_PER_NODE", "value": "auto"},
            {"name": "PET_NNODES", "value": "3"},
        ]

    def test_status_after_the_master_completes_with_workers_running(self):
        cluster = Cluster(self.JOB)
        cluster.sync()
        cluster.run()
        cluster.sync(60)
        cluster.succeed("mnist-master-0")
        result = cluster.sync(600)
        sel = {t: SELECTOR.format(job="mnist", op="pytorchjob-controller", t=t) for t in ("master", "worker")}
        assert result.status == {
            "startTime": STAMP0,
            "completionTime": stamp(660),
            "conditions": [
                {
                    "type": "Created",
                    "status": "True",
                    "reason": "PyTorchJobCreated",
                    "message": "PyTorchJob mnist is created.",
                    "lastUpdateTime": STAMP0,
                    "lastTransitionTime": STAMP0,
                },
                {
                    "type": "Running",
                    "status": "False",
                    "reason": "PyTorchJobRunning",
                    "message": "PyTorchJob mnist is running.",
                    "lastUpdateTime": stamp(60),
                    "lastTransitionTime": stamp(60),
                },
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": "PyTorchJobSucceeded",
                    "message": "PyTorchJob mnist is successfully completed.",
                    "lastUpdateTime": stamp(660),
                    "lastTransitionTime": stamp(660),
                },
            ],
            "replicaStatuses": {
                "Master": {"succeeded": 1, "selector": sel["master"]},
                "Worker": {"succeeded": 2, "selector": sel["worker"]},
            },
        }
        # cleanPodPolicy None: the still-running workers and every service stay.
        assert names(result.children, "Pod") == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
        assert names(result.children, "Service") == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]


class TestA2ElasticPyTorch:
    POLICY = {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3, "maxRestarts": 100}
    JOB = with_spec(job("PyTorchJob", name="el", Worker=2), elasticPolicy=POLICY)

    @pytest.mark.parametrize("name", ["el-worker-0", "el-worker-1"])
    def test_every_worker_env(self, name):
        pod = by_name(Cluster(self.JOB).sync().children, "Pod")[name]
        assert env_list(pod) == [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "PET_NPROC_PER_NODE", "value": "auto"},
            {"name": "PET_RDZV_ENDPOINT", "value": "el-worker-0:23456"},
            {"name": "PET_RDZV_BACKEND", "value": "c10d"},
            {"name": "PET_NNODES", "value": "1:3"},
            {"name": "PET_MAX_RESTARTS", "value": "100"},
        ]
        assert "initContainers" not in pod["spec"]

    def test_worker_0_is_the_master_role(self):
        pods = by_name(Cluster(self.JOB).sync().children, "Pod")
        assert pods["el-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
        assert "training.kubeflow.org/job-role" not in pods["el-worker-1"]["metadata"]["labels"]

    def test_succeeds_as_soon_as_any_worker_does(self):
        cluster = Cluster(self.JOB)
        cluster.sync()
        cluster.run()
        cluster.succeed("el-worker-1")
        cluster.sync(5)
        assert cluster.state() == "Succeeded"

    def test_metrics_add_an_hpa_targeting_the_job(self):
        metrics = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            }
        ]
        job_spec = with_spec(self.JOB, elasticPolicy={**self.POLICY, "metrics": metrics})
        hpa = by_name(Cluster(job_spec).sync().children, "HorizontalPodAutoscaler")["el"]
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "el",
        }
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)


class TestA3TFDist:
    JOB = job("TFJob", name="dist", namespace="ml", PS=1, Worker=2)

    def test_worker_1_tf_config(self):
        pod = by_name(Cluster(self.JOB).sync().children, "Pod")["dist-worker-1"]
        assert env_list(pod, "tensorflow") == [
            {
                "name": "TF_CONFIG",
                "value": '{"cluster":{"ps":["dist-ps-0.ml.svc:2222"],"worker":["dist-worker-0.ml.svc:2222",'
                '"dist-worker-1.ml.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}',
            }
        ]

    def test_worker_0_is_the_master_role(self):
        pods = by_name(Cluster(self.JOB).sync().children, "Pod")
        assert [
            n for n, p in sorted(pods.items()) if "training.kubeflow.org/job-role" in p["metadata"]["labels"]
        ] == ["dist-worker-0"]

    def test_succeeds_when_worker_0_exits_zero_and_ps_keeps_running(self):
        cluster = Cluster(self.JOB)
        cluster.sync()
        cluster.run()
        cluster.sync(5)
        cluster.succeed("dist-worker-0")
        result = cluster.sync(5)
        assert cluster.state() == "Succeeded"
        assert "dist-ps-0" in names(result.children, "Pod")
        assert cluster.pod("dist-ps-0")["status"]["phase"] == "Running"

    def test_ps_is_cleaned_under_clean_pod_policy_running(self):
        job_spec = {**self.JOB, "spec": {**self.JOB["spec"], "runPolicy": {"cleanPodPolicy": "Running"}}}
        cluster = Cluster(job_spec)
        cluster.sync()
        cluster.run()
        cluster.succeed("dist-worker-0")
        cluster.sync(5)
        result = cluster.sync(1)
        assert names(result.children, "Pod") == ["dist-worker-0"]

    def test_single_replica_tfjob_gets_no_tf_config(self):
        pod = by_name(Cluster(job("TFJob", name="solo", namespace="ml", Worker=1)).sync().children, "Pod")[
            "solo-worker-0"
        ]
        assert env_list(pod) == []


class TestA4MPIHvd:
    JOB = with_spec(job("MPIJob", name="hvd", Launcher=1, Worker=2), slotsPerWorker=2)

    def test_config_map(self):
        cluster = Cluster(self.JOB)
        data = by_name(cluster.sync().children, "ConfigMap")["hvd-config"]["data"]
        assert data["hostfile"] == "hvd-worker-0 slots=2\nhvd-worker-1 slots=2\n"
        assert data["discover_hosts.sh"] == "#!/bin/sh"
        assert data["kubexec.sh"] == (
            '#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"'
        )

    def test_discover_hosts_lists_running_workers(self):
        cluster = Cluster(self.JOB)
        cluster.sync()
        cluster.sync()  # the pods, once hvd-config is the job's
        cluster.run("hvd-worker-1")
        data = by_name(cluster.sync().children, "ConfigMap")["hvd-config"]["data"]
        assert data["discover_hosts.sh"] == "#!/bin/sh\necho hvd-worker-1:2"
        cluster.run("hvd-worker-0")
        data = by_name(cluster.sync().children, "ConfigMap")["hvd-config"]["data"]
        assert data["discover_hosts.sh"] == "#!/bin/sh\necho hvd-worker-0:2\necho hvd-worker-1:2"

    def test_rbac(self):
        children = Cluster(self.JOB).converge().children
        assert names(children, "ServiceAccount") == ["hvd-launcher"]
        assert names(children, "Role") == ["hvd-launcher"]
        assert names(children, "RoleBinding") == ["hvd-launcher"]
        role = by_name(children, "Role")["hvd-launcher"]
        assert role["rules"][1]["resourceNames"] == ["hvd-worker-0", "hvd-worker-1"]

    def test_pods_and_no_services(self):
        children = Cluster(self.JOB).converge().children
        pods = by_name(children, "Pod")
        assert sorted(pods) == ["hvd-launcher", "hvd-worker-0", "hvd-worker-1"]
        assert names(children, "Service") == []
        assert pods["hvd-worker-0"]["spec"]["containers"][0]["command"] == ["sleep"]
        assert pods["hvd-worker-0"]["spec"]["containers"][0]["args"] == ["365d"]
        assert [i["name"] for i in pods["hvd-launcher"]["spec"]["initContainers"]] == ["kubectl-delivery"]
        assert [e["name"] for e in env_list(pods["hvd-launcher"])] == [
            "OMPI_MCA_plm_rsh_agent",
            "OMPI_MCA_orte_default_hostfile",
            "NVIDIA_VISIBLE_DEVICES",
            "NVIDIA_DRIVER_CAPABILITIES",
            "I_MPI_HYDRA_BOOTSTRAP",
            "I_MPI_HYDRA_BOOTSTRAP_EXEC",
        ]

    def test_lifecycle_follows_the_launcher_and_fails_on_any_failed_pod(self):
        cluster = Cluster(self.JOB)
        cluster.converge()
        cluster.run("hvd-launcher")
        cluster.sync(1)
        assert cluster.state() == "Running"
        cluster.succeed("hvd-launcher")
        cluster.sync(1)
        assert cluster.state() == "Succeeded"
        failing = Cluster(self.JOB)
        failing.converge()
        failing.run()
        failing.fail("hvd-worker-0")
        failing.sync(1)
        assert failing.state() == "Failed"
