"""OCI image archives for a release: one image per tar of an OCI image layout, named by its full reference.

    python3 oci_archive.py from-docker-archive --ref docker.io/library/trainop:0.2.0 IN.tar OUT.tar
    python3 oci_archive.py from-layout --layout DIR --source metacontroller/metacontroller:v4.17.2 \\
        --ref ghcr.io/metacontroller/metacontroller:v4.17.2 OUT.tar
    python3 oci_archive.py load --layout DIR ARCHIVE.tar     # the archive's image into a layout
    python3 oci_archive.py digest ARCHIVE.tar                 # its manifest digest

Each prints ``REF DIGEST``. An archive is what ``skopeo copy oci-archive:FILE docker://HOST/REPO:TAG``,
``ctr images import FILE`` and ``podman load -i FILE`` read: ``oci-layout``, ``index.json`` with one manifest
whose annotations name the reference (``io.containerd.image.name``, the full name containerd imports it
under, and ``org.opencontainers.image.ref.name``, the tag, as the image-layout spec means it), and the blobs.

``from-docker-archive`` reads what ``hack/build-image.sh --save`` writes (``podman save``: a config and
uncompressed layer tars) and keeps every byte: the config blob is the image ID, the layers stay
uncompressed (their digests are the config's ``diff_ids``), so the same image always gives the same
manifest digest, the one the install manifest pins. ``from-layout`` copies an image of an OCI layout
(hack/build-node.sh's Metacontroller image) with its manifest unchanged, so its digest is the layout's.
``load`` is the way back, for the real-node tier: the blobs into the layout its registry serves and the
reference, without the registry's host (``library/trainop:0.2.0``), into its ``index.json``.
The tars are written with sorted names, mtime 0 and uid 0, so one image gives one archive byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The sibling module: one lock and one index format for the layout.
import oci_layout

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONTAINERD_NAME = "io.containerd.image.name"


class ArchiveError(ValueError):
    pass


def _sha256(fh: IO[bytes]) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        h.update(chunk)
        size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def split_ref(ref: str) -> tuple[str, str, str]:
    """``host/repo:tag`` -> (host, repo, tag); the host must be explicit, as the manifest writes it."""
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag or "/" not in name or "." not in name.split("/", 1)[0]:
        raise ArchiveError(
            f"--ref {ref!r} must be a full reference HOST/REPOSITORY:TAG, e.g. docker.io/library/x:1"
        )
    host, repo = name.split("/", 1)
    return host, repo, tag


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, src: Path | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.mode = 0, 0, 0, 0o644
    if src is not None:
        info.size = src.stat().st_size
        with src.open("rb") as fh:
            tar.addfile(info, fh)
    else:
        assert data is not None
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _write_archive(out: Path, ref: str, manifest: bytes, blobs: dict[str, Path | bytes]) -> str:
    """Write the archive atomically; returns the manifest's digest."""
    _, _, tag = split_ref(ref)
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": MANIFEST_TYPE,
                "digest": digest,
                "size": len(manifest),
                "annotations": {CONTAINERD_NAME: ref, oci_layout.REF_ANNOTATION: tag},
            }
        ],
    }
    all_blobs: dict[str, Path | bytes] = {**blobs, digest: manifest}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for blob_digest in sorted(all_blobs):
            content = all_blobs[blob_digest]
            name = f"blobs/sha256/{blob_digest.removeprefix('sha256:')}"
            if isinstance(content, bytes):
                _add(tar, name, data=content)
            else:
                _add(tar, name, src=content)
        _add(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        _add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    tmp.replace(out)
    return digest


def from_docker_archive(src: Path, ref: str, out: Path) -> str:
    split_ref(ref)
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as work_dir:
        work = Path(work_dir)
        with tarfile.open(src) as tar:
            members = {m.name: m for m in tar.getmembers()}
            if "manifest.json" not in members:
                raise ArchiveError(f"{src} is not a docker-archive (no manifest.json)")
            manifest_member = tar.extractfile(members["manifest.json"])
            if manifest_member is None:
                raise ArchiveError(f"{src} is not a docker-archive (no manifest.json)")
            images = json.loads(manifest_member.read())
            if len(images) != 1:
                raise ArchiveError(f"{src} holds {len(images)} images; save exactly one (podman save -m)")
            (image,) = images
            config_file = tar.extractfile(members[image["Config"]])
            assert config_file is not None
            config = config_file.read()
            diff_ids = json.loads(config)["rootfs"]["diff_ids"]
            layers = []
            for i, name in enumerate(image["Layers"]):
                layer_file = tar.extractfile(members[name])
                assert layer_file is not None
                dest = work / f"layer{i}"
                with dest.open("wb") as fh:
                    for chunk in iter(lambda f=layer_file: f.read(1 << 20), b""):  # type: ignore[misc]
                        fh.write(chunk)
                with dest.open("rb") as fh:
                    digest, size = _sha256(fh)
                if digest != diff_ids[i]:
                    raise ArchiveError(f"{src}: layer {name} is {digest}, the config says {diff_ids[i]}")
                layers.append((digest, size, dest))
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        manifest: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": d, "size": s} for d, s, _ in layers],
        }
        blobs: dict[str, Path | bytes] = {config_digest: config, **{d: p for d, _, p in layers}}
        return _write_archive(out, ref, json.dumps(manifest, sort_keys=True).encode(), blobs)


def from_layout(layout: Path, source: str, ref: str, out: Path) -> str:
    split_ref(ref)
    index = json.loads((layout / "index.json").read_text())
    found = [m for m in index.get("manifests", []) if oci_layout._ref(m) == source]
    if not found:
        raise ArchiveError(f"{source} is not in {layout}/index.json")
    digest = str(found[-1]["digest"])
    blob_dir = layout / "blobs" / "sha256"
    manifest = (blob_dir / digest.removeprefix("sha256:")).read_bytes()
    parsed = json.loads(manifest)
    if parsed.get("mediaType", MANIFEST_TYPE) != MANIFEST_TYPE:
        raise ArchiveError(f"{source} is a {parsed.get('mediaType')}, not a single-platform image manifest")
    blobs: dict[str, Path | bytes] = {
        d["digest"]: blob_dir / d["digest"].removeprefix("sha256:")
        for d in [parsed["config"], *parsed["layers"]]
    }
    written = _write_archive(out, ref, manifest, blobs)
    assert written == digest
    return written


def _archive_index(tar: tarfile.TarFile) -> dict[str, Any]:
    member = tar.extractfile("index.json")
    if member is None:
        raise ArchiveError("no index.json: not an OCI archive")
    index: dict[str, Any] = json.loads(member.read())
    if len(index.get("manifests", [])) != 1:
        raise ArchiveError("an archive of a release holds exactly one image")
    return index


def digest_of(archive: Path) -> tuple[str, str]:
    with tarfile.open(archive) as tar:
        (entry,) = _archive_index(tar)["manifests"]
    return str(entry["annotations"][CONTAINERD_NAME]), str(entry["digest"])


def load(archive: Path, layout: Path) -> tuple[str, str]:
    """The archive's blobs into ``layout`` and its reference (minus the host) into its index."""
    ref, digest = digest_of(archive)
    _, repo, tag = split_ref(ref)
    blob_dir = layout / "blobs" / "sha256"
    blob_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith("blobs/sha256/"):
                dest = blob_dir / Path(member.name).name
                if not dest.exists():
                    data = tar.extractfile(member)
                    assert data is not None
                    tmp = dest.with_name(dest.name + ".tmp")
                    with tmp.open("wb") as fh:
                        for chunk in iter(lambda d=data: d.read(1 << 20), b""):  # type: ignore[misc]
                            fh.write(chunk)
                    tmp.replace(dest)
    with oci_layout._index(layout) as index:
        size = (blob_dir / digest.removeprefix("sha256:")).stat().st_size
        oci_layout._point(
            index, f"{repo}:{tag}", {"mediaType": MANIFEST_TYPE, "digest": digest, "size": size}
        )
    return ref, digest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    docker = sub.add_parser("from-docker-archive", help="what hack/build-image.sh --save writes")
    docker.add_argument("--ref", required=True, help="HOST/REPOSITORY:TAG, e.g. docker.io/library/x:1")
    docker.add_argument("src", type=Path)
    docker.add_argument("out", type=Path)
    layout = sub.add_parser("from-layout", help="an image of an OCI layout, manifest unchanged")
    layout.add_argument("--layout", required=True, type=Path)
    layout.add_argument("--source", required=True, help="its reference in the layout, e.g. repo:tag")
    layout.add_argument("--ref", required=True, help="HOST/REPOSITORY:TAG of the archive")
    layout.add_argument("out", type=Path)
    loader = sub.add_parser("load", help="an archive's image into an OCI layout")
    loader.add_argument("--layout", required=True, type=Path)
    loader.add_argument("archive", type=Path)
    digest = sub.add_parser("digest", help="the reference and manifest digest of an archive")
    digest.add_argument("archive", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.action == "from-docker-archive":
            ref, found = args.ref, from_docker_archive(args.src, args.ref, args.out)
        elif args.action == "from-layout":
            ref, found = args.ref, from_layout(args.layout, args.source, args.ref, args.out)
        elif args.action == "load":
            ref, found = load(args.archive, args.layout)
        else:
            ref, found = digest_of(args.archive)
    except (ArchiveError, OSError, KeyError) as e:
        parser.error(str(e))
    print(f"{ref} {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
