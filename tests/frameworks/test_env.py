"""Environment per framework, byte for byte and in Kubeflow's order.

The rules: docs/design.md#environment-per-framework.
"""

from __future__ import annotations

import json

import pytest

from tests.builders import container, job, replica, with_spec
from tests.controller.fakes import Cluster, env_list, env_of, pods_by_name
from trainop.job.addresses import ClusterAddresses
from trainop.job.settings import Settings


def pairs(pod, ctr=0):
    return [(e["name"], e.get("value", e.get("valueFrom"))) for e in env_list(pod, ctr)]


def port(kind, rtype, name, number, replicas=1):
    ctr_name = {
        "TFJob": "tensorflow",
        "PyTorchJob": "pytorch",
        "JAXJob": "jax",
        "PaddleJob": "paddle",
        "XGBoostJob": "xgboost",
        "MXJob": "mxnet",
    }[kind]
    return replica(kind, replicas, [container(ctr_name, ports=[{"name": name, "containerPort": number}])])


# ---- TensorFlow ---------------------------------------------------------------------------------
class TestTFConfig:
    def test_is_the_go_encoding_of_cluster_task_environment(self):
        spec = job("TFJob", name="j", namespace="ns", Chief=1, Evaluator=1, PS=2, Worker=2)
        pod = pods_by_name(spec)["j-worker-1"]
        assert env_list(pod, "tensorflow") == [
            {
                "name": "TF_CONFIG",
                "value": '{"cluster":{"chief":["j-chief-0.ns.svc:2222"],'
                '"evaluator":["j-evaluator-0.ns.svc:2222"],'
                '"ps":["j-ps-0.ns.svc:2222","j-ps-1.ns.svc:2222"],'
                '"worker":["j-worker-0.ns.svc:2222","j-worker-1.ns.svc:2222"]},'
                '"task":{"type":"worker","index":1},"environment":"cloud"}',
            }
        ]

    def test_master_type_appears_as_master(self):
        pod = pods_by_name(job("TFJob", name="j", namespace="ns", Master=1, Worker=1))["j-master-0"]
        config = json.loads(env_of(pod)["TF_CONFIG"])
        assert config["cluster"] == {
            "master": ["j-master-0.ns.svc:2222"],
            "worker": ["j-worker-0.ns.svc:2222"],
        }
        assert config["task"] == {"type": "master", "index": 0}

    def test_each_type_uses_its_own_tfjob_port(self):
        spec = job("TFJob", name="j", namespace="ns", PS=port("TFJob", "PS", "tfjob-port", 5000), Worker=1)
        pod = pods_by_name(spec)["j-worker-0"]
        assert json.loads(env_of(pod)["TF_CONFIG"])["cluster"] == {
            "ps": ["j-ps-0.ns.svc:5000"],
            "worker": ["j-worker-0.ns.svc:2222"],
        }

    def test_appends_custom_cluster_domain(self):
        settings = Settings(addresses=ClusterAddresses(cluster_domain="cluster.local"))
        pod = pods_by_name(job("TFJob", name="j", namespace="ns", PS=1, Worker=1), settings)["j-ps-0"]
        assert json.loads(env_of(pod)["TF_CONFIG"])["cluster"] == {
            "ps": ["j-ps-0.ns.svc.cluster.local:2222"],
            "worker": ["j-worker-0.ns.svc.cluster.local:2222"],
        }

    def test_goes_only_into_the_tensorflow_container(self):
        worker = replica("TFJob", 2, [container("sidecar"), container("tensorflow")])
        pod = pods_by_name(job("TFJob", name="j", Worker=worker))["j-worker-0"]
        assert "env" not in pod["spec"]["containers"][0]
        assert list(env_of(pod, "tensorflow")) == ["TF_CONFIG"]

    def test_keeps_the_users_env_first(self):
        worker = replica("TFJob", 2, [container("tensorflow", env=[{"name": "A", "value": "1"}])])
        pod = pods_by_name(job("TFJob", name="j", Worker=worker))["j-worker-0"]
        assert [e["name"] for e in env_list(pod)] == ["A", "TF_CONFIG"]

    @pytest.mark.parametrize("types", [{"Worker": 1}, {"Chief": 1}, {"Chief": 1, "Worker": 0}])
    def test_single_replica_job_gets_no_tf_config(self, types):
        pods = pods_by_name(job("TFJob", name="j", **types))
        assert all("env" not in p["spec"]["containers"][0] for p in pods.values())

    def test_dynamic_worker_is_sparse_for_a_worker(self):
        spec = with_spec(
            job("TFJob", name="j", namespace="ns", Chief=1, PS=2, Worker=2), enableDynamicWorker=True
        )
        pods = pods_by_name(spec)
        assert env_of(pods["j-worker-1"])["TF_CONFIG"] == (
            '{"cluster":{"worker":{"1":"j-worker-1.ns.svc:2222"},"ps":["j-ps-0.ns.svc:2222","j-ps-1.ns.svc:2222"]},'
            '"task":{"type":"worker","index":1}}'
        )

    def test_dynamic_worker_is_sparse_for_a_ps_and_empty_for_others(self):
        spec = with_spec(
            job("TFJob", name="j", namespace="ns", Chief=1, PS=2, Worker=2), enableDynamicWorker=True
        )
        pods = pods_by_name(spec)
        assert env_of(pods["j-ps-1"])["TF_CONFIG"] == (
            '{"cluster":{"worker":{},"ps":["j-ps-1.ns.svc:2222"]},"task":{"type":"ps","index":1}}'
        )
        assert env_of(pods["j-chief-0"])["TF_CONFIG"] == (
            '{"cluster":{"worker":{},"ps":[]},"task":{"type":"chief","index":0}}'
        )


# ---- PyTorch ------------------------------------------------------------------------------------
class TestPyTorchEnv:
    def test_master_and_worker_variables_in_kubeflows_order(self):
        pods = pods_by_name(job("PyTorchJob", name="j", Master=1, Worker=2))
        assert pairs(pods["j-worker-1"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("MASTER_PORT", "23456"),
            ("PET_MASTER_PORT", "23456"),
            ("MASTER_ADDR", "j-master-0"),
            ("PET_MASTER_ADDR", "j-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", "2"),
            ("PET_NODE_RANK", "2"),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_NNODES", "3"),
        ]

    def test_goes_into_every_container(self):
        master = replica("PyTorchJob", 1, [container("pytorch"), container("logger")])
        pod = pods_by_name(job("PyTorchJob", name="j", Master=master))["j-master-0"]
        assert pairs(pod, 0) == pairs(pod, 1)
        assert env_of(pod, "logger")["RANK"] == "0"

    def test_numeric_nproc_per_node_multiplies_world_size(self):
        spec = with_spec(job("PyTorchJob", name="j", Master=1, Worker=2), nprocPerNode="4")
        env = env_of(pods_by_name(spec)["j-worker-0"])
        assert (env["WORLD_SIZE"], env["PET_NPROC_PER_NODE"], env["RANK"]) == ("12", "4", "1")

    @pytest.mark.parametrize("word", ["auto", "cpu", "gpu"])
    def test_word_nproc_per_node_counts_pods(self, word):
        spec = with_spec(job("PyTorchJob", name="j", Master=1, Worker=1), nprocPerNode=word)
        env = env_of(pods_by_name(spec)["j-master-0"])
        assert (env["WORLD_SIZE"], env["PET_NPROC_PER_NODE"]) == ("2", word)

    def test_master_port_is_the_masters_pytorchjob_port(self):
        spec = job(
            "PyTorchJob", name="j", Master=port("PyTorchJob", "Master", "pytorchjob-port", 29500), Worker=1
        )
        env = env_of(pods_by_name(spec)["j-worker-0"])
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"

    def test_worker_only_non_elastic_job_gets_no_master_rank_or_world_size(self):
        pods = pods_by_name(job("PyTorchJob", name="j", Worker=2))
        assert pairs(pods["j-worker-1"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_NNODES", "2"),
        ]

    def test_elastic_variables_with_every_option(self):
        spec = with_spec(
            job("PyTorchJob", name="j", Worker=2),
            nprocPerNode="2",
            elasticPolicy={
                "rdzvBackend": "etcd",
                "rdzvHost": "etcd.infra",
                "rdzvPort": 2379,
                "rdzvId": "run-7",
                "rdzvConf": [{"key": "timeout", "value": "60"}, {"key": "read_timeout", "value": "5"}],
                "standalone": True,
                "minReplicas": 2,
                "maxReplicas": 4,
                "maxRestarts": 3,
            },
        )
        assert pairs(pods_by_name(spec)["j-worker-0"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PET_NPROC_PER_NODE", "2"),
            ("PET_RDZV_ENDPOINT", "etcd.infra:2379"),
            ("PET_RDZV_BACKEND", "etcd"),
            ("PET_NNODES", "2:4"),
            ("PET_MAX_RESTARTS", "3"),
            ("PET_RDZV_ID", "run-7"),
            ("PET_RDZV_CONF", "timeout=60,read_timeout=5"),
            ("PET_STANDALONE", ""),
        ]

    def test_elastic_defaults_rendezvous_at_worker_0_with_c10d_and_worker_replicas(self):
        spec = with_spec(job("PyTorchJob", name="j", Worker=3), elasticPolicy={})
        assert pairs(pods_by_name(spec)["j-worker-2"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_RDZV_ENDPOINT", "j-worker-0:23456"),
            ("PET_RDZV_BACKEND", "c10d"),
            ("PET_NNODES", "3:3"),
        ]

    def test_deprecated_elastic_nproc_per_node_is_passed_through(self):
        spec = with_spec(job("PyTorchJob", name="j", Worker=1), elasticPolicy={"nProcPerNode": 8})
        env = pairs(pods_by_name(spec)["j-worker-0"])
        assert ("PET_NPROC_PER_NODE", "8") in env
        assert [n for n, _ in env].count("PET_NPROC_PER_NODE") == 1


# ---- XGBoost ------------------------------------------------------------------------------------
class TestXGBoostEnv:
    def test_master_rank_world_size_and_worker_addresses(self):
        pods = pods_by_name(job("XGBoostJob", name="j", Master=1, Worker=2))
        assert pairs(pods["j-worker-0"]) == [
            ("MASTER_PORT", "9999"),
            ("MASTER_ADDR", "j-master-0"),
            ("WORLD_SIZE", "3"),
            ("RANK", "1"),
            ("PYTHONUNBUFFERED", "1"),
            ("WORKER_PORT", "9999"),
            ("WORKER_ADDRS", "j-worker-0,j-worker-1"),
        ]
        assert env_of(pods["j-master-0"])["RANK"] == "0"

    def test_a_lone_master_gets_no_worker_variables(self):
        pod = pods_by_name(job("XGBoostJob", name="j", Master=1))["j-master-0"]
        assert pairs(pod) == [
            ("MASTER_PORT", "9999"),
            ("MASTER_ADDR", "j-master-0"),
            ("WORLD_SIZE", "1"),
            ("RANK", "0"),
            ("PYTHONUNBUFFERED", "1"),
        ]

    def test_worker_port_is_the_workers_own(self):
        spec = job(
            "XGBoostJob", name="j", Master=1, Worker=port("XGBoostJob", "Worker", "xgboostjob-port", 7000)
        )
        env = env_of(pods_by_name(spec)["j-master-0"])
        assert (env["MASTER_PORT"], env["WORKER_PORT"]) == ("9999", "7000")


# ---- Paddle -------------------------------------------------------------------------------------
class TestPaddleEnv:
    POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}

    def test_collective_mode_worker_0_advertises_its_pod_ip(self):
        pods = pods_by_name(job("PaddleJob", name="j", Worker=2))
        assert pairs(pods["j-worker-0"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PADDLE_JOB_ID", "j"),
            ("PADDLE_NNODES", "2"),
            ("POD_IP_DUMMY", self.POD_IP),
            ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
        ]
        assert pairs(pods["j-worker-1"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PADDLE_JOB_ID", "j"),
            ("PADDLE_NNODES", "2"),
            ("PADDLE_MASTER", "j-worker-0:36543"),
        ]

    def test_ps_mode_master_0_advertises_and_counts_servers_and_trainers(self):
        pods = pods_by_name(job("PaddleJob", name="j", Master=1, Worker=2))
        assert pairs(pods["j-master-0"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PADDLE_JOB_ID", "j"),
            ("PADDLE_NNODES", "3"),
            ("POD_IP_DUMMY", self.POD_IP),
            ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
            ("PADDLE_SERVER_NUM", "1"),
        ]
        assert pairs(pods["j-worker-1"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PADDLE_JOB_ID", "j"),
            ("PADDLE_NNODES", "3"),
            ("PADDLE_MASTER", "j-master-0:36543"),
            ("PADDLE_TRAINER_NUM", "1"),
        ]

    def test_pod_ip_dummy_is_a_downward_api_reference(self):
        pod = pods_by_name(job("PaddleJob", name="j", Worker=1))["j-worker-0"]
        entry = next(e for e in env_list(pod) if e["name"] == "POD_IP_DUMMY")
        assert entry == {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}

    def test_port_is_the_leaders_master_port(self):
        spec = job("PaddleJob", name="j", Master=port("PaddleJob", "Master", "master", 4000), Worker=1)
        assert env_of(pods_by_name(spec)["j-worker-0"])["PADDLE_MASTER"] == "j-master-0:4000"


# ---- JAX ----------------------------------------------------------------------------------------
class TestJaxEnv:
    def test_coordinator_is_worker_0_and_process_id_is_the_index(self):
        pods = pods_by_name(job("JAXJob", name="j", Worker=3))
        assert pairs(pods["j-worker-2"]) == [
            ("PYTHONUNBUFFERED", "1"),
            ("COORDINATOR_PORT", "6666"),
            ("COORDINATOR_ADDRESS", "j-worker-0"),
            ("NUM_PROCESSES", "3"),
            ("PROCESS_ID", "2"),
        ]

    def test_coordinator_port_is_the_workers_jaxjob_port(self):
        spec = job("JAXJob", name="j", Worker=port("JAXJob", "Worker", "jaxjob-port", 1234, replicas=2))
        assert env_of(pods_by_name(spec)["j-worker-1"])["COORDINATOR_PORT"] == "1234"


# ---- MXNet --------------------------------------------------------------------------------------
class TestMXNetEnv:
    def test_mx_config_and_dmlc_variables(self):
        pods = pods_by_name(job("MXJob", name="j", Scheduler=1, Server=1, Worker=2))
        assert pairs(pods["j-worker-1"]) == [
            (
                "MX_CONFIG",
                '{"cluster":{"scheduler":[{"url":"j-scheduler-0","port":9091}],'
                '"server":[{"url":"j-server-0","port":9091}],'
                '"worker":[{"url":"j-worker-0","port":9091},{"url":"j-worker-1","port":9091}]},'
                '"labels":{"scheduler":"","server":"","worker":""},"task":{"type":"worker","index":1}}',
            ),
            ("DMLC_PS_ROOT_PORT", "9091"),
            ("DMLC_PS_ROOT_URI", "j-scheduler-0"),
            ("DMLC_NUM_SERVER", "1"),
            ("DMLC_NUM_WORKER", "2"),
            ("DMLC_ROLE", "worker"),
            ("DMLC_USE_KUBERNETES", "1"),
            ("DMLC_WORKER_ID", "1"),
        ]

    def test_only_workers_get_a_worker_id(self):
        pods = pods_by_name(job("MXJob", name="j", Scheduler=1, Server=1, Worker=1))
        assert "DMLC_WORKER_ID" not in env_of(pods["j-server-0"])
        assert env_of(pods["j-server-0"])["DMLC_ROLE"] == "server"

    def test_no_scheduler_means_no_ps_root(self):
        env = env_of(pods_by_name(job("MXJob", name="j", Worker=1))["j-worker-0"])
        assert "DMLC_PS_ROOT_URI" not in env and "DMLC_PS_ROOT_PORT" not in env

    def test_tuner_server_key_annotation_becomes_the_label(self):
        tuner = replica("MXJob", 1)
        tuner["template"]["metadata"] = {"annotations": {"mxnet.kubeflow.org/tuner-server-key": "secret-key"}}
        spec = with_spec(job("MXJob", name="j", TunerServer=tuner, Tuner=1, TunerTracker=1), jobMode="MXTune")
        config = json.loads(env_of(pods_by_name(spec)["j-tuner-0"])["MX_CONFIG"])
        assert config["labels"] == {"tuner": "", "tunerserver": "secret-key", "tunertracker": ""}


# ---- MPI ----------------------------------------------------------------------------------------
class TestMPIEnv:
    def test_launcher_env_for_a_cpu_launcher(self):
        pods = pods_by_name(job("MPIJob", name="hvd", Launcher=1, Worker=2))
        assert pairs(pods["hvd-launcher"]) == [
            ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
            ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
            ("NVIDIA_VISIBLE_DEVICES", ""),
            ("NVIDIA_DRIVER_CAPABILITIES", ""),
            ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
        ]

    def test_only_the_first_launcher_container_gets_it(self):
        launcher = replica("MPIJob", 1, [container("mpi"), container("sidecar")])
        pod = pods_by_name(job("MPIJob", name="hvd", Launcher=launcher))["hvd-launcher"]
        assert "env" not in pod["spec"]["containers"][1]

    def test_users_intel_mpi_bootstrap_is_not_overridden(self):
        launcher = replica(
            "MPIJob", 1, [container("mpi", env=[{"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "ssh"}])]
        )
        env = pairs(pods_by_name(job("MPIJob", name="hvd", Launcher=launcher))["hvd-launcher"])
        assert [v for n, v in env if n == "I_MPI_HYDRA_BOOTSTRAP"] == ["ssh"]
        assert ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh") in env

    def test_workers_get_no_env(self):
        pods = pods_by_name(job("MPIJob", name="hvd", Launcher=1, Worker=2))
        assert all("env" not in pods[n]["spec"]["containers"][0] for n in ("hvd-worker-0", "hvd-worker-1"))


@pytest.mark.parametrize(
    "spec",
    [
        job("TFJob", name="j", PS=1, Worker=2),
        job("PyTorchJob", name="j", Master=1, Worker=2),
        job("XGBoostJob", name="j", Master=1, Worker=2),
        job("PaddleJob", name="j", Worker=2),
        job("JAXJob", name="j", Worker=2),
        job("MXJob", name="j", Scheduler=1, Worker=2),
        job("MPIJob", name="j", Launcher=1, Worker=2),
    ],
    ids=lambda j: j["kind"],
)
def test_env_does_not_depend_on_the_order_or_spelling_of_replica_keys(spec):
    """`worker` and `Worker` are the same type after defaulting; map order never changes the env."""
    field = next(iter(k for k in spec["spec"] if k.endswith("ReplicaSpecs")))
    reordered = {**spec, "spec": {**spec["spec"], field: dict(reversed(list(spec["spec"][field].items())))}}
    assert Cluster(spec).sync().children == Cluster(reordered).sync().children
