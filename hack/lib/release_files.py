"""The files of a release that hack/release.sh composes from the build's outputs (docs/release.md).

    python3 release_files.py manifest --kustomize K.yaml --metacontroller M.yaml \\
        --pin docker.io/library/trainop=sha256:... [--pin ...] [--tensorboard REF@DIGEST] \\
        [--init-image REF@DIGEST] --out trainop.yaml --crds-out trainop-crds.yaml
    python3 release_files.py page --dist dist/ [--base-url URL]     # writes dist/index.html
    python3 release_files.py chart-values VALUES --image-tag TAG@DIGEST --tensorboard REF@DIGEST \
        --metacontroller-tag TAG@DIGEST --init-image REF@DIGEST

``manifest``: one install manifest from ``kubectl kustomize manifests/`` and Metacontroller as the chart's
values configure it (``helm template``, into its own namespace ``metacontroller``, where the manifests'
NetworkPolicies expect it). Namespaces come first, then every CustomResourceDefinition, then the rest in
the order given. Every container image is replaced by ``repository@digest`` from ``--pin``; an image no
``--pin`` names fails the release (a manifest that pulls a tag could run another image than the one
shipped). ``--tensorboard`` is written into the servers' ``TRAINOP_TENSORBOARD_IMAGE``, the image a job's
TensorBoard runs; ``--init-image`` into the hooks' ``TRAINOP_PYTORCH_INIT_IMAGE`` and
``TRAINOP_MPI_KUBECTL_DELIVERY_IMAGE``, the image of the init containers they give PyTorch workers and MPI
launchers (Kubeflow's --pytorch-init-container-image and --mpi-kubectl-delivery-image). ``--crds-out``
gets every CRD of the manifest: they must be Established before ``kubectl apply`` can map the
CompositeControllers and the jobs.

``chart-values``: the packaged chart's values.yaml with the images it installs pinned by the digests of
the archives shipped beside it (``image.tag``, ``tensorboard.image``, Metacontroller's ``image.tag``,
``pytorchInitImage`` and ``mpiKubectlDeliveryImage``, each ``tag@digest``, which pulls by digest), its
comments kept: what ``helm show values`` shows is the file.

``page``: ``index.html`` listing every release folder of ``dist/`` (newest first) with its install
commands, files and notes. ``--base-url`` is where ``dist/`` is served; the default is a placeholder the
page explains.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path
from typing import Any

import yaml

PLACEHOLDER_BASE_URL = "https://releases.example/trainop"
TENSORBOARD_ENV = "TRAINOP_TENSORBOARD_IMAGE"
INIT_IMAGE_ENV = ("TRAINOP_PYTORCH_INIT_IMAGE", "TRAINOP_MPI_KUBECTL_DELIVERY_IMAGE")
SERVER_COMPONENTS = ("hooks", "webhooks")
VERSION_DIR = re.compile(r"^([0-9]+)\.([0-9]+)\.([0-9]+)$")

Doc = dict[str, Any]


class ReleaseError(ValueError):
    pass


def load_docs(path: Path) -> list[Doc]:
    # libyaml's loader: the CRDs are megabytes of YAML.
    return [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if d]


def _pod_specs(doc: Doc) -> list[Doc]:
    spec = doc.get("spec") or {}
    if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        return [spec["template"]["spec"]]
    if doc.get("kind") == "Pod":
        return [spec]
    return []


def _repository(image: str) -> str:
    """``host/repo:tag`` or ``host/repo@digest`` -> ``host/repo``; a bare name gets docker.io's prefix."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


def _set_env(container: Doc, values: dict[str, str]) -> None:
    env = [e for e in container.get("env") or [] if e.get("name") not in values]
    container["env"] = [*env, *({"name": k, "value": v} for k, v in values.items())]


def pin_images(
    docs: list[Doc], pins: dict[str, str], tensorboard: str | None, init_image: str | None = None
) -> list[str]:
    """Pin every container image in place, and the images the servers give jobs' pods; returns the
    images no pin names (empty on success)."""
    unpinned = []
    for doc in docs:
        component = ((doc.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component")
        for pod in _pod_specs(doc):
            for key in ("initContainers", "containers"):
                for container in pod.get(key) or []:
                    repo = _repository(container["image"])
                    if repo in pins:
                        container["image"] = f"{repo}@{pins[repo]}"
                    else:
                        unpinned.append(f"{doc['kind']}/{doc['metadata']['name']}: {container['image']}")
                    if key != "containers":
                        continue
                    if tensorboard and component in SERVER_COMPONENTS:
                        _set_env(container, {TENSORBOARD_ENV: tensorboard})
                    if init_image and component == "hooks":
                        _set_env(container, dict.fromkeys(INIT_IMAGE_ENV, init_image))
    return unpinned


def install_manifest(kustomized: list[Doc], metacontroller: list[Doc]) -> list[Doc]:
    namespace: Doc = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "metacontroller", "labels": {"app.kubernetes.io/part-of": "trainop"}},
    }
    docs = [namespace, *metacontroller, *kustomized]
    first = [d for d in docs if d["kind"] == "Namespace"]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] not in ("Namespace", "CustomResourceDefinition")]
    return [*first, *crds, *rest]


def dump(docs: list[Doc]) -> str:
    return "".join(
        "---\n" + yaml.dump(d, Dumper=yaml.CSafeDumper, sort_keys=False, width=1_000_000) for d in docs
    )


def _parse_pins(values: list[str]) -> dict[str, str]:
    pins = {}
    for value in values:
        repo, sep, digest = value.partition("=")
        if not sep or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise ReleaseError(f"--pin {value!r}: expected REPOSITORY=sha256:<64 hex digits>")
        pins[repo] = digest
    return pins


# --------------------------------------------------------------------------------------------- page


def release_versions(dist: Path) -> list[str]:
    """The release folders of ``dist/``, newest first."""
    found = [p.name for p in dist.iterdir() if p.is_dir() and VERSION_DIR.match(p.name)]
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")), reverse=True)


def install_commands(base_url: str, version: str) -> dict[str, list[str]]:
    at = f"{base_url.rstrip('/')}/{version}"
    return {
        "kubectl": [
            f"kubectl apply --server-side -f {at}/trainop-crds.yaml",
            "kubectl wait --for=condition=Established crd --all --timeout=60s",
            f"kubectl apply --server-side -f {at}/trainop.yaml",
        ],
        "helm": [
            f"helm repo add trainop {base_url.rstrip('/')}/",
            "helm repo update trainop",
            f"helm install trainop trainop/trainop --version {version} -n trainop-system --create-namespace",
        ],
        "pip": [f"pip install {at}/trainop-{version}-py3-none-any.whl"],
        "examples": [
            "docker build --build-arg FRAMEWORK=pytorch -t trainop-examples/pytorch:latest "
            f"{at}/training-images.tar.gz",
            f"kubectl apply -f {at}/examples/pytorch.yaml",
        ],
    }


def page(dist: Path, base_url: str) -> str:
    versions = release_versions(dist)
    placeholder = base_url == PLACEHOLDER_BASE_URL
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><title>trainop releases</title>',
        "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "pre{background:#f4f4f4;padding:.6rem;overflow-x:auto}h2{border-top:1px solid #ccc;padding-top:1rem}"
        "</style></head><body>",
        "<h1>trainop releases</h1>",
        "<p>Kubeflow Training Operator v1 compatible jobs on Metacontroller hooks and admission webhooks. "
        "Each release is installed one of three ways: the install manifest with <code>kubectl</code>, the "
        "Helm chart from this Helm repository, or the Python package with <code>pip</code> "
        "(<code>trainop run</code> and the examples, no cluster needed).</p>",
    ]
    if placeholder:
        out.append(
            f"<p><strong>{html.escape(base_url)}</strong> stands for the address this folder is served "
            "from: replace it in the commands, or regenerate this page with <code>hack/release.sh VERSION "
            "--base-url URL</code>.</p>"
        )
    out.append(
        "<p>The images are in each release's <code>images/</code> as OCI archives. The install manifest "
        "pins them by digest: push each to the registry your nodes pull from under its name (the archive "
        "holds it), or import it into the nodes' containerd (<code>ctr -n k8s.io images import</code>).</p>"
    )
    if not versions:
        out.append("<p>No release yet.</p>")
    for version in versions:
        folder = dist / version
        commands = install_commands(base_url, version)
        out.append(f'<h2 id="v{version}">trainop {version}</h2>')
        for title, key in (
            ("Install manifest", "kubectl"),
            ("Helm chart (Metacontroller included)", "helm"),
            ("Python package", "pip"),
            ("An example on the cluster (its image built from the release's build context)", "examples"),
        ):
            out.append(f"<h3>{title}</h3><pre>{html.escape(chr(10).join(commands[key]))}</pre>")
        files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        links = "".join(
            f'<li><a href="{html.escape(version)}/{html.escape(f)}">{html.escape(f)}</a> '
            f"({(folder / f).stat().st_size:,} bytes)</li>"
            for f in files
        )
        verify = (
            "<code>ssh-keygen -Y verify -f allowed_signers -I release@trainop -n trainop-release "
            "-s SHA256SUMS.sig &lt; SHA256SUMS &amp;&amp; sha256sum -c SHA256SUMS</code>, with the "
            "project's published <code>allowed_signers</code>"
            if (folder / "SHA256SUMS.sig").is_file()
            else "<code>sha256sum -c SHA256SUMS</code> (this release is unsigned)"
        )
        out.append(f"<h3>Files</h3><p>Verify with {verify}.</p><ul>{links}</ul>")
        notes = folder / "RELEASE-NOTES.md"
        if notes.is_file():
            text = html.escape(notes.read_text())
            out.append(f"<details><summary>Release notes</summary><pre>{text}</pre></details>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


_DIGEST_REF = re.compile(r"^[^\s@\"]+@sha256:[0-9a-f]{64}$")


def pin_chart_values(
    text: str, image_tag: str, tensorboard: str, metacontroller_tag: str, init_image: str
) -> str:
    """values.yaml with the release's images pinned; each place must be found exactly once."""
    for flag, value in (("--image-tag", image_tag), ("--tensorboard", tensorboard),
                        ("--metacontroller-tag", metacontroller_tag),
                        ("--init-image", init_image)):  # fmt: skip
        if not _DIGEST_REF.match(value):
            raise ReleaseError(f"{flag} {value!r}: expected NAME@sha256:<64 hex digits>")
    block = r"(?:  .*\n|#.*\n|\n)*?"  # the lines of one top-level key's block, comments included
    pinned_mc = (
        "  # Pinned by the release: the image archived beside this chart.\n"
        f'  image:\n    tag: "{metacontroller_tag}"\n'
    )
    edits = (
        ("image.tag", rf"(?m)^(image:\n{block}  tag: ).*$", rf'\g<1>"{image_tag}"'),
        ("tensorboard.image", rf"(?m)^(tensorboard:\n{block}  image: ).*$", rf"\g<1>{tensorboard}"),
        ("metacontroller.image", r"(?m)^(metacontroller:\n  enabled: .*\n)", rf"\g<1>{pinned_mc}"),
        ("pytorchInitImage", r"(?m)^(pytorchInitImage: ).*$", rf"\g<1>{init_image}"),
        ("mpiKubectlDeliveryImage", r"(?m)^(mpiKubectlDeliveryImage: ).*$", rf"\g<1>{init_image}"),
    )  # fmt: skip
    for what, pattern, replacement in edits:
        text, count = re.subn(pattern, replacement, text, count=1)
        if count != 1:
            raise ReleaseError(f"values.yaml: no {what} to pin (the chart's values changed shape)")
    return text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    man = sub.add_parser("manifest", help="the install manifest and its CRDs")
    man.add_argument("--kustomize", required=True, type=Path, help="kubectl kustomize manifests/")
    man.add_argument("--metacontroller", required=True, type=Path, help="helm template of Metacontroller")
    man.add_argument("--pin", action="append", default=[], help="REPOSITORY=sha256:... (repeat)")
    man.add_argument("--tensorboard", help="the TensorBoard image, REPOSITORY@sha256:...")
    man.add_argument("--init-image", help="the hooks' init container image, REPOSITORY@sha256:...")
    man.add_argument("--out", required=True, type=Path)
    man.add_argument("--crds-out", required=True, type=Path)
    cv = sub.add_parser("chart-values", help="pin the packaged chart's images in its values.yaml")
    cv.add_argument("values", type=Path)
    cv.add_argument("--image-tag", required=True, help="VERSION@sha256:... of the project's image")
    cv.add_argument("--tensorboard", required=True, help="REPOSITORY:TAG@sha256:... of the TensorBoard image")
    cv.add_argument("--metacontroller-tag", required=True, help="vX.Y.Z@sha256:... of Metacontroller's image")
    cv.add_argument("--init-image", required=True, help="REPOSITORY:TAG@sha256:... of the trainop-init image")
    pg = sub.add_parser("page", help="dist/index.html")
    pg.add_argument("--dist", required=True, type=Path)
    pg.add_argument("--base-url", default=PLACEHOLDER_BASE_URL)
    args = parser.parse_args(argv)
    try:
        if args.action == "manifest":
            docs = install_manifest(load_docs(args.kustomize), load_docs(args.metacontroller))
            unpinned = pin_images(docs, _parse_pins(args.pin), args.tensorboard, args.init_image)
            if unpinned:
                raise ReleaseError("images without a digest (no --pin names them): " + "; ".join(unpinned))
            args.out.write_text(dump(docs))
            args.crds_out.write_text(dump([d for d in docs if d["kind"] == "CustomResourceDefinition"]))
        elif args.action == "chart-values":
            pinned = pin_chart_values(
                args.values.read_text(), args.image_tag, args.tensorboard, args.metacontroller_tag,
                args.init_image,
            )  # fmt: skip
            args.values.write_text(pinned)
        else:
            if not re.match(r"^https?://[^\s\"'<>]+$", args.base_url):
                raise ReleaseError(f"--base-url {args.base_url!r} must be an http(s) URL")
            (args.dist / "index.html").write_text(page(args.dist, args.base_url))
    except (ReleaseError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
