"""The Helm chart installed in-cluster on the real node, from images built here, as a kind user would.

A kind user builds the project's image, ``kind load``s it under the name the chart's default values ask
for (``trainop:<appVersion>``) and runs ``helm install``; Metacontroller's image comes from its registry.
Here both come from this machine: :func:`load_chart_images` names the image hack/build-image.sh built
from this work tree ``library/trainop:<appVersion>`` in the tier's OCI layout, next to the Metacontroller
image hack/build-node.sh made from the binary built from the vendored source
(``metacontroller/metacontroller:v<version>``, which the node's containerd resolves for ``ghcr.io``).
It also removes both references from containerd, so that the kubelet (``imagePullPolicy:
IfNotPresent``) pulls what the layout holds now instead of reusing an image of an earlier run.

:class:`InClusterRelease` is the kwok tier's ``Release`` without the development URLs: the apiserver
calls the webhooks through their Service and Metacontroller, a pod of the release, calls the hooks
through theirs.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from chart import CHART, Release
from controlplane import ControlPlaneError
from images import ensure_image

from tests.e2e_node.realnode import NodeControlPlane
from tests.e2e_node.registry import Layout

REPO = Path(__file__).resolve().parents[2]
OCI_LAYOUT_TOOL = REPO / "hack" / "lib" / "oci_layout.py"
METACONTROLLER_REPOSITORY = "metacontroller/metacontroller"


@dataclass(frozen=True)
class ChartImage:
    reference: str  # as the chart's pods name it, e.g. docker.io/library/trainop:0.1.0
    digest: str  # the manifest digest the layout serves for it

    @property
    def repository(self) -> str:
        return self.reference.rsplit(":", 1)[0]


@dataclass(frozen=True)
class ChartImages:
    project: ChartImage
    metacontroller: ChartImage


def app_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def metacontroller_version(chart_archive_dir: Path) -> str:
    """The image tag the Metacontroller subchart defaults to: its appVersion (e.g. v4.17.2)."""
    (archive,) = sorted(chart_archive_dir.glob("metacontroller-helm-*.tgz"))
    with tarfile.open(archive) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")]
        data = tar.extractfile(member)
        assert data is not None
        return str(yaml.safe_load(data.read())["appVersion"])


def _digest(layout: Layout, ref: str) -> str:
    repo, tag = ref.rsplit(":", 1)
    found = layout.tagged(repo, tag)
    if found is None:
        raise ControlPlaneError(f"{ref} is not in {layout.root}: run hack/build-node.sh and "
                                "hack/build-training-images.sh")  # fmt: skip
    return found[0]


def load_chart_images(node: NodeControlPlane, chart: Path) -> ChartImages:
    """Put this work tree's image and Metacontroller's under the chart's default names; see the module."""
    layout = Layout(node.layout)
    built_from = ensure_image().removeprefix("docker.io/")
    project_ref = f"library/trainop:{app_version()}"
    done = subprocess.run(
        [sys.executable, str(OCI_LAYOUT_TOOL), "tag", "--layout", str(node.layout), built_from, project_ref],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise ControlPlaneError(f"tagging {built_from} as {project_ref} failed: {done.stderr}")
    mc_ref = f"{METACONTROLLER_REPOSITORY}:{metacontroller_version(chart / 'charts')}"
    # The digest of the content-addressed build, not of the alias: what the pods must run.
    images = ChartImages(
        project=ChartImage(f"docker.io/{project_ref}", _digest(layout, built_from)),
        metacontroller=ChartImage(f"ghcr.io/{mc_ref}", _digest(layout, mc_ref)),
    )
    node.ctr("images", "rm", images.project.reference, images.metacontroller.reference, check=False)
    return images


class InClusterRelease(Release):
    """A release whose servers are its own pods on the real node (no development URLs)."""

    @property
    def development_urls(self) -> list[str]:
        return []

    def pods(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self.kubectl("get", "pods", "-n", self.namespace, "-l", selector, "-o", "json").stdout
        )["items"]
        return items

    def component_pods(self, component: str) -> list[dict[str, Any]]:
        """The release's pods of ``component``: hooks, webhooks or metacontroller."""
        if component == "metacontroller":
            return self.pods(f"app.kubernetes.io/name=metacontroller,app.kubernetes.io/instance={self.name}")
        return self.pods(f"app.kubernetes.io/component={component},app.kubernetes.io/instance={self.name}")

    def logs(self, component: str) -> str:
        """Every log line of every pod of ``component``."""
        return "\n".join(
            self.kubectl("logs", "-n", self.namespace, pod["metadata"]["name"], "--all-containers").stdout
            for pod in self.component_pods(component)
        )

    def log_records(self, component: str) -> list[dict[str, Any]]:
        """The JSON lines (one per request, events) of every pod of ``component``."""
        out = []
        for line in self.logs(component).splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out
