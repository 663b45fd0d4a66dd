"""Pod volumes as local directories: ConfigMaps written out as files, emptyDirs made, hostPaths used as is.

Every directory and file made here is inside the pod's own folder of the run (trainop.local.paths); a
hostPath names a directory of this machine on purpose and is used, never written to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from trainop.jsontypes import Json
from trainop.local.errors import NotRunnableLocally
from trainop.local.paths import inside, write_file

DEFAULT_MODE = 0o644


class ConfigMapNotReady(Exception):
    """The pod mounts a ConfigMap that does not exist yet; kubelet would hold it in ContainerCreating."""


def local_dirs(pod: Json, root: Path, path: str) -> dict[str, Path]:
    """Volume name -> the local directory standing for it (`root` is the pod's own folder); no side effects,
    so a pod that cannot run here fails before anything of the job starts."""
    out: dict[str, Path] = {}
    for i, volume in enumerate((pod.get("spec") or {}).get("volumes") or []):
        name = str(volume.get("name"))
        if "hostPath" in volume:
            out[name] = Path(str((volume["hostPath"] or {}).get("path", "")))
        elif "emptyDir" in volume or "configMap" in volume:
            out[name] = inside(root, name, field=f"{path}.volumes[{i}].name")
        else:
            kind = next((k for k in volume if k != "name"), "source")
            raise NotRunnableLocally(
                f"{path}.volumes[{i}].{kind}",
                f"{kind} volumes need a cluster; locally only configMap (from the job's own children), "
                "emptyDir and hostPath volumes are available",
            )
    return out


def materialize(pod: Json, config_maps: Mapping[str, Json], dirs: Mapping[str, Path], path: str) -> None:
    """Create the emptyDirs and write the ConfigMaps of `pod` into the directories `local_dirs` chose."""
    for i, volume in enumerate((pod.get("spec") or {}).get("volumes") or []):
        target = dirs[str(volume.get("name"))]
        if "emptyDir" in volume:
            target.mkdir(parents=True, exist_ok=True)
        elif "configMap" in volume:
            write_config_map(volume["configMap"] or {}, config_maps, target, f"{path}.volumes[{i}].configMap")


def write_config_map(source: Json, config_maps: Mapping[str, Json], target: Path, path: str) -> None:
    """Write the selected keys of a ConfigMap into `target`, with the modes the volume asks for; `path` is
    the volume source's field, for errors."""
    config_map = config_maps.get(str(source.get("name")))
    if config_map is None:
        if source.get("optional"):
            target.mkdir(parents=True, exist_ok=True)
            return
        raise ConfigMapNotReady(str(source.get("name")))
    data: Mapping[str, str] = config_map.get("data") or {}
    default_mode = int(source.get("defaultMode") or DEFAULT_MODE)
    items = source.get("items") or [{"key": k, "path": k} for k in data]
    target.mkdir(parents=True, exist_ok=True)
    for j, item in enumerate(items):
        key = str(item.get("key"))
        if key not in data:
            continue
        file = inside(target, str(item.get("path") or key), field=f"{path}.items[{j}].path")
        file.parent.mkdir(parents=True, exist_ok=True)
        if file.is_file() and file.read_text() == data[key]:
            continue
        # Files may be read-only (mode 0444): write_file replaces them instead of writing in place.
        write_file(file, data[key], int(item.get("mode") or default_mode))
