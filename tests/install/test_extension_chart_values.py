"""Every chart value an extension declares (`Extension.chart_values`, trainop/extensions/faces.py) reaches
the environment variable it names on the servers it names, and no extension variable of the servers is
undeclared.

Hermetic: it reads values.yaml and the templates as text (rendering them needs helm, the e2e tier;
tests/install/test_extension_chart.py and its siblings render them there). An env list a template includes
from _helpers.tpl (`trainop.extensionEnv`) is expanded in place; a variable whose value is a `$var` is
traced to the lines that build the variable (placement's `range` over its defaults).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path, PurePosixPath

import pytest
import yaml

from trainop.extensions import EXTENSIONS
from trainop.extensions.faces import SERVERS, ChartValue

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "trainop"
TEMPLATES = CHART / "templates"
EXTENSIONS_SOURCE = ROOT / "trainop" / "extensions"
ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
INCLUDE = re.compile(r"\{\{-?\s*include\s+\"([^\"]+)\"[^}]*\}\}")
ENV = re.compile(r"- name: ([A-Z][A-Z0-9_]*)\n\s*value: ([^\n]*)")
OPENS = ("define", "if", "range", "with", "block")

DECLARED = [(ext.name, v) for ext in EXTENSIONS for v in ext.chart_values]


def defines() -> dict[str, str]:
    """The bodies of _helpers.tpl's (and the other .tpl files') `define`s, by name."""
    out: dict[str, str] = {}
    for path in sorted(TEMPLATES.glob("*.tpl")):
        text = path.read_text()
        depth, name, start = 0, "", 0
        for match in ACTION.finditer(text):
            action = match[1]
            if action.startswith("/*"):
                continue
            word = action.split(maxsplit=1)[0] if action else ""
            if word in OPENS:
                if depth == 0 and word == "define":
                    name, start = action.split('"')[1], match.end()
                depth += 1
            elif word == "end":
                depth -= 1
                if depth == 0 and name:
                    out[name], name = text[start : match.start()].strip("\n"), ""
    return out


def expanded(text: str) -> str:
    """`text` with every include of a define that renders env entries replaced by its body."""
    bodies = {k: v for k, v in defines().items() if ENV.search(v)}
    return INCLUDE.sub(lambda m: "\n" + bodies[m[1]] + "\n" if m[1] in bodies else m[0], text)


def server_text(server: str) -> str:
    """The server's Deployment container, from its `- name: <server>` under `containers:` on."""
    text = expanded((TEMPLATES / f"{server}.yaml").read_text())
    match = re.search(rf"containers:\n\s*- name: {server}\n", text)
    assert match, f"{server}.yaml: no container named {server}"
    return text[match.start() :].split("\n---", 1)[0]


def env_of(server: str) -> dict[str, str]:
    return {name: value for name, value in ENV.findall(server_text(server))}


def sources(text: str, value: str) -> str:
    """The template text a value line draws on: itself and, for each `$var` in it, every line that sets
    the variable with the `range` it sits in."""
    lines = text.splitlines()
    out = [value]
    for var in set(re.findall(r"\$(\w+)", value)):
        for i, line in enumerate(lines):
            if re.search(rf"\${var}\s*:?=", line):
                out.append(line)
                for above in reversed(lines[:i]):
                    if re.search(r"\{\{-?\s*end\b", above):
                        break
                    if re.search(r"\{\{-?\s*range\b", above):
                        out.append(above)
                        break
    return "\n".join(out)


def values_at(path: str) -> object:
    node: object = yaml.safe_load((CHART / "values.yaml").read_text())
    for part in path.split("."):
        assert isinstance(node, dict) and part in node, f"values.yaml has no {path}"
        node = node[part]
    return node


def extension_env_literals() -> set[str]:
    """Every TRAINOP_* string in the extensions' source: the variables they may read."""
    out = set()
    for path in EXTENSIONS_SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out |= {node.value} if re.fullmatch(r"TRAINOP_[A-Z0-9_]+", node.value) else set()
    return out


def test_every_extension_with_cluster_settings_declares_them() -> None:
    # What the chart hands the extensions today; an extension that loses or gains one changes this.
    assert {(name, v.value, v.env) for name, v in DECLARED} == {
        ("accelerators", "accelerators.profiles", "TRAINOP_ACCELERATOR_PROFILES"),
        ("placement", "placement.defaults", "TRAINOP_PLACEMENT_DEFAULTS"),
        ("tensorboard", "tensorboard.image", "TRAINOP_TENSORBOARD_IMAGE"),
        ("tensorboard", "tensorboard.keepAfter", "TRAINOP_TENSORBOARD_KEEP_AFTER"),
        ("tensorboard", "tensorboard.ingressFrom", "TRAINOP_TENSORBOARD_INGRESS_FROM"),
        ("json-logs", "logging.trainingProcesses.format", "TRAINOP_DEFAULT_LOG_FORMAT"),
        ("default-server", "tensorflow.defaultParameterServer", "TRAINOP_DEFAULT_PARAMETER_SERVER"),
    }


@pytest.mark.parametrize(("extension", "setting"), DECLARED, ids=[f"{n}:{v.value}" for n, v in DECLARED])
def test_a_declared_chart_value_reaches_its_variable_on_its_servers(
    extension: str, setting: ChartValue
) -> None:
    values_at(setting.value)
    assert set(setting.servers) <= set(SERVERS)
    for server in SERVERS:
        env = env_of(server)
        if server not in setting.servers:
            assert setting.env not in env, (
                f"{server} gets {setting.env}, which {extension} declares for others"
            )
            continue
        assert setting.env in env, f"{server}.yaml sets no {setting.env} ({extension}: {setting.value})"
        if setting.file:
            assert_file_reaches(server, setting)
        else:
            assert f".Values.{setting.value}" in sources(server_text(server), env[setting.env]), (
                f"{server}.yaml: {setting.env} is not made from .Values.{setting.value}"
            )


def assert_file_reaches(server: str, setting: ChartValue) -> None:
    """The variable names the file; the server mounts a ConfigMap at its folder; a template renders the
    value into that ConfigMap under the file's name."""
    text = server_text(server)
    assert env_of(server)[setting.env].strip("\"'") == setting.file
    file = PurePosixPath(setting.file)
    mount = re.search(rf"- name: (\S+)\n\s*mountPath: {re.escape(str(file.parent))}\n", text)
    assert mount, f"{server}.yaml mounts nothing at {file.parent}"
    volume = re.search(rf"- name: {re.escape(mount[1])}\n\s*configMap:\n\s*name: ([^\n]+)", text)
    assert volume, f"{server}.yaml: the volume {mount[1]} is not a ConfigMap"
    rendering = [
        p.name
        for p in TEMPLATES.glob("*.yaml")
        if "kind: ConfigMap" in (t := p.read_text())
        and f"name: {volume[1]}" in t
        and f"{file.name}:" in t
        and f".Values.{setting.value}" in t
    ]
    assert rendering, f"no template renders .Values.{setting.value} as {file.name} of {volume[1]}"


@pytest.mark.parametrize("server", SERVERS)
def test_no_extension_variable_of_a_server_is_undeclared(server: str) -> None:
    declared = {v.env for _, v in DECLARED if server in v.servers}
    env = env_of(server)
    extension_env = {name for name, _ in ENV.findall(defines()["trainop.extensionEnv"])}
    read_by_extensions = extension_env_literals() & set(env)
    assert (extension_env | read_by_extensions) - declared == set()


def test_each_declared_variable_is_read_by_its_own_extension() -> None:
    for ext in EXTENSIONS:
        module = type(ext).__module__
        folder = EXTENSIONS_SOURCE / module.split(".")[2]
        files = list(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]
        text = "".join(p.read_text() for p in files)
        for setting in ext.chart_values:
            assert f'"{setting.env}"' in text, f"{ext.name} declares {setting.env} but never names it"
