"""Accelerators on the real control plane: each profile's template as the real webhook stores it, a GPU
PyTorchJob scheduled only onto kwok nodes that advertise the device and carry the profile's labels, and
DRA claims allocated by the real kube-scheduler from ResourceSlices published for kwok nodes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml
from trainop_stack import IMAGE, Namespace, TrainopStack, job, kwok_annotations, replica

from trainop import examples
from trainop.extensions.accelerators import builtin_profiles_text
from trainop.jsontypes import Json

pytestmark = pytest.mark.e2e

PROFILES: Json = yaml.safe_load(builtin_profiles_text())
# Every node this file adds carries this taint, so pods of other tests never land on them.
FENCE = {"key": "e2e.trainop.dev/accelerators", "operator": "Exists", "effect": "NoSchedule"}
DRIVER = "gpu.e2e.trainop.dev"


def node(name: str, labels: dict[str, str], devices: dict[str, str], taints: list[Json]) -> Json:
    resources = {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi", "pods": "20", **devices}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"type": "kwok", "kubernetes.io/hostname": name, **labels}},
        "spec": {"taints": [{"key": FENCE["key"], "value": "true", "effect": "NoSchedule"}, *taints]},
        "status": {"capacity": resources, "allocatable": resources},
    }


@pytest.fixture
def nodes(stack: TrainopStack) -> Iterator[list[str]]:
    """Adds the nodes a test creates; deletes them after it."""
    created: list[str] = []

    yield created
    for name in created:
        stack.kubectl("delete", "node", name, "--wait=false", check=False)


def add_nodes(stack: TrainopStack, created: list[str], *objs: Json) -> None:
    for obj in objs:
        stack.kubectl("create", "-f", "-", input=json.dumps(obj))
        created.append(obj["metadata"]["name"])
    for obj in objs:
        name = obj["metadata"]["name"]
        stack.kubectl("wait", "--for=condition=Ready", f"node/{name}", "--timeout=60s")

        def ready(name: str = name) -> bool:
            # The node controller lifts node.kubernetes.io/not-ready once kwok reports Ready.
            taints = stack.cp.get_json(f"node/{name}").get("spec", {}).get("taints", [])
            return not any(t["key"].startswith("node.kubernetes.io/") for t in taints)

        stack.wait_until(f"node {name} schedulable", ready, timeout=60)


def pytorch(name: str, annotations: dict[str, str], workers: int = 2, running: bool = False) -> Json:
    pod = kwok_annotations(None) if running else kwok_annotations()
    specs = {
        "Master": replica("PyTorchJob", 1, annotations=pod),
        "Worker": replica("PyTorchJob", workers, annotations=pod),
    }
    out = job("PyTorchJob", name, specs)
    out["metadata"]["annotations"] = annotations
    return out


def expected_template_spec(profile: Json, count: int) -> Json:
    """docs/accelerators.md's promise: the device limit, env, selector and tolerations of the profile."""
    container: Json = {
        "name": "pytorch",
        "image": IMAGE,
        # The CRD's schema defaults the port's protocol.
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
        "resources": {"limits": {profile["resource"]: str(count)}},
    }
    if profile.get("env"):
        container["env"] = profile["env"]
    spec: Json = {"containers": [container]}
    if profile.get("nodeSelector"):
        spec["nodeSelector"] = profile["nodeSelector"]
    if profile.get("tolerations"):
        spec["tolerations"] = profile["tolerations"]
    return spec


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_is_stored_as_documented_by_the_real_webhook(
    module_namespace: Namespace, name: str
) -> None:
    ns = module_namespace
    job_name = f"p-{name.replace('.', '-')}"
    obj = pytorch(job_name, {"trainop.dev/accelerator.Worker": f"{name}:2"})
    # Server-side dry run: admitted and defaulted by the real webhooks, stored nowhere, scheduled never.
    out = ns.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj))
    stored = json.loads(out.stdout)

    worker = stored["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker == expected_template_spec(PROFILES[name], 2)
    master = stored["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "nodeSelector" not in master and "resources" not in master["containers"][0]


def test_a_conflicting_value_is_denied_by_the_real_webhook_naming_the_field(namespace: Namespace) -> None:
    obj = pytorch("conflict", {"trainop.dev/accelerator.Worker": "nvidia-gke-l4:2"})
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"
    }

    result = namespace.create(obj, check=False)

    assert result.returncode != 0
    assert (
        "denied the request: spec.pytorchReplicaSpecs[Worker].template.spec.nodeSelector"
        '[cloud.google.com/gke-accelerator]: Invalid value: "nvidia-tesla-t4": conflicts with the '
        'accelerator profile "nvidia-gke-l4" chosen by metadata.annotations[trainop.dev/accelerator.Worker]'
    ) in result.stderr


def test_a_gpu_pytorchjob_lands_only_on_nodes_with_the_resource_and_the_labels(
    stack: TrainopStack, namespace: Namespace, nodes: list[str]
) -> None:
    gke = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    gpus = {"nvidia.com/gpu": "8"}
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    suffix = namespace.name[-8:]
    right = f"l4-{suffix}"
    add_nodes(
        stack,
        nodes,
        node(right, gke, gpus, gpu_taint),
        node(f"labels-only-{suffix}", gke, {}, []),  # the label, but no GPU
        node(f"gpus-only-{suffix}", {}, gpus, gpu_taint),  # GPUs, but another accelerator's pool
    )
    obj = pytorch(
        "on-l4",
        {
            "trainop.dev/accelerator.Master": "nvidia-gke-l4",
            "trainop.dev/accelerator.Worker": "nvidia-gke-l4:2",
        },
        workers=3,
    )
    for spec in obj["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["tolerations"] = [FENCE]
    namespace.create(obj)

    pods = namespace.wait_children(
        "pods", "on-l4", {"on-l4-master-0", *(f"on-l4-worker-{i}" for i in range(3))}
    )
    namespace.wait_until(
        "every pod bound to a node",
        lambda: all(namespace.get(f"pod/{p}")["spec"].get("nodeName") for p in pods),
        timeout=60,
    )

    placed = {p: namespace.get(f"pod/{p}")["spec"]["nodeName"] for p in pods}
    assert placed == dict.fromkeys(pods, right)
    namespace.wait_for("pytorchjob/on-l4", "Succeeded", timeout=90)


def test_dra_claims_of_each_replica_are_allocated_by_the_real_scheduler(
    stack: TrainopStack, namespace: Namespace, nodes: list[str]
) -> None:
    suffix = namespace.name[-8:]
    names = [f"dra-{suffix}-{i}" for i in range(2)]
    add_nodes(stack, nodes, *(node(n, {"e2e.trainop.dev/dra": suffix}, {}, []) for n in names))
    device_class = f"gpu-{suffix}"
    stack.kubectl(
        "apply", "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": device_class},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        ),
    )  # fmt: skip
    for n in names:
        # What a DRA driver's kubelet plugin would publish: two devices per node, one pool per node.
        stack.kubectl(
            "apply", "-f", "-",
            input=json.dumps(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{n}-{DRIVER}"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": n,
                        "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{i}"} for i in range(2)],
                    },
                }
            ),
        )  # fmt: skip
    namespace.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
                }
            },
        }
    )
    obj = pytorch("dra", {}, workers=3, running=True)
    for spec in obj["spec"]["pytorchReplicaSpecs"].values():
        pod_spec = spec["template"]["spec"]
        pod_spec["tolerations"] = [FENCE]
        pod_spec["nodeSelector"] = {"e2e.trainop.dev/dra": suffix}
        pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        pod_spec["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    namespace.create(obj)
    pods = {"dra-master-0", *(f"dra-worker-{i}" for i in range(3))}
    namespace.wait_children("pods", "dra", pods)

    def allocated() -> list[Json]:
        claims = namespace.items("resourceclaims")
        done = [c for c in claims if c.get("status", {}).get("allocation")]
        return done if len(done) == len(pods) else []

    namespace.wait_until("a claim allocated for every pod", lambda: bool(allocated()), timeout=90)
    claims = allocated()
    owners = {c["metadata"]["ownerReferences"][0]["name"] for c in claims}
    assert owners == pods
    devices = [
        (r["pool"], r["device"]) for c in claims for r in c["status"]["allocation"]["devices"]["results"]
    ]
    assert len(set(devices)) == len(pods)  # four distinct devices out of the four published
    for pod in pods:
        spec = namespace.get(f"pod/{pod}")
        [status] = spec["status"]["resourceClaimStatuses"]
        claim = next(c for c in claims if c["metadata"]["name"] == status["resourceClaimName"])
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == spec["spec"]["nodeName"]
    stack.kubectl("delete", "deviceclass", device_class, "--wait=false", check=False)
    for n in names:
        stack.kubectl("delete", "resourceslice", f"{n}-{DRIVER}", "--wait=false", check=False)


PROVIDER_EXAMPLES = [n for n in examples.names() if n.startswith("pytorch-") and n != "pytorch-dra"]


@pytest.mark.parametrize("name", PROVIDER_EXAMPLES)
def test_each_provider_example_is_admitted_with_its_profile_written_in(
    namespace: Namespace, name: str
) -> None:
    """`trainop examples show NAME | kubectl apply -f -` as far as the apiserver stores it (a server-side
    dry run: kwok nodes of every provider are not what this test is about)."""
    docs = list(yaml.safe_load_all(examples.example(name).document))
    [job_doc] = [d for d in docs if d["kind"] == "PyTorchJob"]
    done = namespace.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(job_doc))
    stored = json.loads(done.stdout)
    annotation = stored["metadata"]["annotations"]["trainop.dev/accelerator.Worker"]
    profile = PROFILES[annotation.split(":")[0]]
    worker = stored["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert profile["resource"] in worker["containers"][0]["resources"]["limits"]
    assert worker.get("nodeSelector", {}) == profile.get("nodeSelector", {})
