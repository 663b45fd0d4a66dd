"""Add an image made from plain rootfs tarballs to an OCI image layout directory.

The real-node tier serves one OCI layout (``$CACHE/images/oci``) to containerd through a pull-only
registry on loopback (tests/e2e_node/registry.py); buildah pushes the training images there with its
``oci:`` transport, and the few tiny images that need no container engine (the pause sandbox, a
busybox + kubectl toolbox) are written here from files this machine built or Debian shipped. Layers are
stored uncompressed. The reference (``repo:tag``) goes into ``index.json`` as
``org.opencontainers.image.ref.name``, as buildah and skopeo write it; an older entry of the same
reference is replaced.

    python3 oci_layout.py --layout DIR --ref trainop-e2e/pause:3.10 --entrypoint /pause rootfs.tar
    python3 oci_layout.py prune --layout DIR --drop-prefix library/trainop:src- --keep library/trainop:src-abc
    python3 oci_layout.py tag --layout DIR library/trainop:src-abc library/trainop:0.1.0

``tag`` gives an image of the layout a second reference, as ``docker tag`` then ``kind load`` would put a
locally built image under the name a chart's default values ask for; ``has`` exits 0 when the layout
names a reference (a build's stamp alone does not prove it: another writer may have replaced index.json).

Every change to index.json holds ``<layout>.lock`` (flock) from reading it to writing it back;
hack/build-training-images.sh holds the same lock around ``buildah push``, the layout's other writer.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REF_ANNOTATION = "org.opencontainers.image.ref.name"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def _ref(entry: dict[str, Any]) -> str:
    return str((entry.get("annotations") or {}).get(REF_ANNOTATION, ""))


@contextlib.contextmanager
def _index(layout: Path) -> Iterator[dict[str, Any]]:
    """index.json for reading and changing, under ``<layout>.lock`` (the lock the shell scripts' pushes
    hold); written back atomically when the block ends without an error."""
    layout.mkdir(parents=True, exist_ok=True)
    index_path = layout / "index.json"
    with open(layout.parent / f"{layout.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        empty = {"schemaVersion": 2, "manifests": []}
        index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else empty
        index.setdefault("manifests", [])
        yield index
        tmp = index_path.with_name(f"index.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index, indent=1))
        tmp.replace(index_path)


def names(layout: Path, ref: str) -> bool:
    try:
        index = json.loads((layout / "index.json").read_text())
    except (OSError, ValueError):
        return False
    return any(_ref(m) == ref for m in index.get("manifests", []))


def _point(index: dict[str, Any], ref: str, descriptor: dict[str, Any]) -> None:
    """Point ``ref`` at ``descriptor``, replacing what it named before."""
    index["manifests"] = [m for m in index["manifests"] if _ref(m) != ref]
    index["manifests"].append({**descriptor, "annotations": {REF_ANNOTATION: ref}})


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _put_blob(layout: Path, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest[7:]
    if not path.exists():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return {"digest": digest, "size": len(data)}


def _put_file_blob(layout: Path, src: Path) -> dict[str, Any]:
    digest = _sha256_file(src)
    path = layout / "blobs" / "sha256" / digest[7:]
    if not path.exists():
        tmp = path.with_name(path.name + ".tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(path)
    return {"digest": digest, "size": src.stat().st_size}


def add_image(
    layout: Path,
    ref: str,
    layers: list[Path],
    *,
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
    env: list[str] | None = None,
    workdir: str | None = None,
    user: str | None = None,
) -> str:
    """Store the image under ``ref`` in ``layout``; returns its manifest digest."""
    if not layers:
        raise ValueError("an image needs at least one layer")
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    layer_descs = [_put_file_blob(layout, p) for p in layers]
    config: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        # diff_ids equal the layer digests because the layers are not compressed.
        "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in layer_descs]},
    }
    for key, value in (("Entrypoint", entrypoint), ("Cmd", cmd), ("WorkingDir", workdir), ("User", user)):
        if value:
            config["config"][key] = value
    config_desc = _put_blob(layout, json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **d} for d in layer_descs],
    }
    manifest_desc = _put_blob(layout, json.dumps(manifest, sort_keys=True).encode())
    with _index(layout) as index:
        _point(index, ref, {"mediaType": MANIFEST_TYPE, **manifest_desc})
    return str(manifest_desc["digest"])


def tag(layout: Path, source: str, ref: str) -> str:
    """Give the image named ``source`` the reference ``ref`` too; returns its manifest digest."""
    with _index(layout) as index:
        found = [m for m in index["manifests"] if _ref(m) == source]
        if not found:
            raise KeyError(f"{source} is not in {layout}/index.json")
        descriptor = {k: v for k, v in found[-1].items() if k != "annotations"}
        _point(index, ref, descriptor)
    return str(descriptor["digest"])


def prune(layout: Path, drop_prefix: str, keep: str, min_age: float = 600.0) -> list[str]:
    """Drop every reference starting with ``drop_prefix`` except ``keep``, and every entry that has no
    reference left (buildah's push keeps the image a reference named before, unnamed), then every blob
    no manifest of the index needs. Blobs younger than ``min_age`` seconds stay: a push may be writing
    them before it names them in the index. Returns the dropped references ("" for an unnamed one)."""
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    with _index(layout) as index:
        for m in index["manifests"]:
            unnamed = not _ref(m)
            (dropped if unnamed or (_ref(m).startswith(drop_prefix) and _ref(m) != keep) else kept).append(m)
        index["manifests"] = kept
    blobs = layout / "blobs" / "sha256"
    needed = set()
    for m in kept:
        needed.add(m["digest"][7:])
        manifest = json.loads((blobs / m["digest"][7:]).read_text())
        needed.update(d["digest"][7:] for d in [manifest["config"], *manifest.get("layers", [])])
    now = time.time()
    for blob in blobs.iterdir():
        if blob.name not in needed and now - blob.stat().st_mtime > min_age:
            blob.unlink()
    return [_ref(m) for m in dropped]


def main(argv: list[str]) -> int:
    if argv[:1] == ["has"]:
        checker = argparse.ArgumentParser(description="exit 0 when the layout names the reference")
        checker.add_argument("--layout", required=True, type=Path)
        checker.add_argument("ref")
        opts = checker.parse_args(argv[1:])
        return 0 if names(opts.layout, opts.ref) else 1
    if argv[:1] == ["prune"]:
        pruner = argparse.ArgumentParser(description="drop old references of a repository and unused blobs")
        pruner.add_argument("--layout", required=True, type=Path)
        pruner.add_argument("--drop-prefix", required=True, help="e.g. library/trainop:src-")
        pruner.add_argument(
            "--keep", required=True, help="the reference to keep, e.g. library/trainop:src-abc"
        )
        opts = pruner.parse_args(argv[1:])
        for ref in prune(opts.layout, opts.drop_prefix, opts.keep):
            print(f"dropped {ref or 'an unnamed image'}")
        return 0
    if argv[:1] == ["tag"]:
        tagger = argparse.ArgumentParser(description="give an image of the layout another reference")
        tagger.add_argument("--layout", required=True, type=Path)
        tagger.add_argument("source", help="an existing reference, e.g. library/trainop:src-abc")
        tagger.add_argument("ref", help="the new reference, e.g. library/trainop:0.1.0")
        opts = tagger.parse_args(argv[1:])
        try:
            print(f"{opts.ref} {tag(opts.layout, opts.source, opts.ref)}")
        except (OSError, KeyError) as e:
            tagger.error(str(e))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--layout", required=True, type=Path, help="OCI image layout directory")
    parser.add_argument("--ref", required=True, help="repository:tag, e.g. trainop-e2e/pause:3.10")
    parser.add_argument("--entrypoint", action="append", help="one argv element (repeat)")
    parser.add_argument("--cmd", action="append", help="one argv element (repeat)")
    parser.add_argument("--env", action="append", help="KEY=VALUE (repeat); replaces the default PATH")
    parser.add_argument("--workdir")
    parser.add_argument("--user", help="the image's USER, e.g. 65532:65532")
    parser.add_argument("layers", nargs="+", type=Path, help="uncompressed rootfs tarballs, bottom first")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.layers if not p.is_file()]
    if missing:
        parser.error(f"layer tarballs not found: {missing}")
    if ":" not in args.ref.rsplit("/", 1)[-1]:
        parser.error(f"--ref {args.ref!r} needs a tag (repository:tag)")
    digest = add_image(
        args.layout, args.ref, args.layers, entrypoint=args.entrypoint, cmd=args.cmd, env=args.env,
        workdir=args.workdir, user=args.user,
    )  # fmt: skip
    print(f"{args.ref} {digest} -> {args.layout}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
