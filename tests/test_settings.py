"""The settings kit (trainop.envvalues) and the one settings object each server builds from it at start-up:
every reader refuses a bad value with one message style, the defaults are the ones the servers always
had, and a bad value stops a server at start-up with the variable's name on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hooks.settings import HookLimits, HookSettings
from trainop.envvalues import (
    ByteSize,
    Flag,
    Names,
    OneOf,
    PositiveInt,
    Required,
    Seconds,
    SettingError,
    Text,
)
from trainop.job.settings import Settings
from trainop.metrics import MetricsLimits, MetricsPort
from trainop.serving import Deadlines, Listener
from trainop.ui.settings import UiSettings
from webhooks.selfcert import CertSettings
from webhooks.settings import ServingCert, WebhookLimits, WebhookSettings

REPO = Path(__file__).resolve().parents[1]


def refused(reader: object, raw: str) -> str:
    with pytest.raises(SettingError) as info:
        reader.read({"X": raw})  # type: ignore[attr-defined]
    assert isinstance(info.value, ValueError)
    return str(info.value)


# ------------------------------------------------------------------------------------------------ readers


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_unset_or_blank_is_the_default(raw: str | None) -> None:
    env = {} if raw is None else {"X": raw}
    assert PositiveInt("X", 7).read(env) == 7
    assert Text("X", "d").read(env) == "d"
    assert Seconds("X", 2.5).read(env) == 2.5
    assert ByteSize("X", 10).read(env) == 10
    assert Flag("X", True).read(env) is True
    assert OneOf("X", "a", ("a", "b")).read(env) == "a"
    assert Names("X").read(env) == ()


def test_text_is_taken_as_written_and_blank_can_mean_off() -> None:
    assert Text("X", "d").read({"X": " 0.0.0.0:1 "}) == "0.0.0.0:1"
    assert Text("X", "0.0.0.0:8081", blank="").read({"X": ""}) == ""
    assert Text("X", "0.0.0.0:8081", blank="").read({}) == "0.0.0.0:8081"


def test_a_required_text_names_what_needs_it() -> None:
    assert Required("X", why="for y").read({"X": "v"}) == "v"
    with pytest.raises(SettingError, match=r"^X: expected a value \(for y\), got nothing$"):
        Required("X", why="for y").read({})


def test_names_are_comma_separated() -> None:
    assert Names("X").read({"X": " a, b,,c "}) == ("a", "b", "c")


def test_one_of_its_choices_in_any_case() -> None:
    assert OneOf("X", "info", ("info", "warning")).read({"X": "WARNING"}) == "warning"
    assert refused(OneOf("X", "info", ("info", "warning")), "loud") == (
        "X: expected one of info, warning, got 'loud'"
    )


def test_a_flag_is_true_or_false() -> None:
    assert Flag("X", False).read({"X": "True"}) is True
    assert Flag("X", True).read({"X": "false"}) is False
    assert refused(Flag("X", False), "yes") == "X: expected true or false, got 'yes'"


@pytest.mark.parametrize(("raw", "value"), [("1", 1), ("16", 16), (" 8 ", 8)])
def test_a_positive_int(raw: str, value: int) -> None:
    assert PositiveInt("X", 2).read({"X": raw}) == value


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "+3", "1.5", "1_000", "٣"])
def test_a_positive_int_is_strict(raw: str) -> None:
    assert refused(PositiveInt("X", 2), raw) == f"X: expected a positive integer, got {raw!r}"


@pytest.mark.parametrize(("raw", "value"), [("0.5", 0.5), ("10", 10.0), ("3600", 3600.0)])
def test_seconds(raw: str, value: float) -> None:
    assert Seconds("X", 1.0).read({"X": raw}) == value


@pytest.mark.parametrize("raw", ["soon", "0", "-1", "3601", "nan", "inf"])
def test_seconds_above_0_and_at_most_the_maximum(raw: str) -> None:
    message = f"X: expected a number of seconds above 0 and at most 3600, got {raw!r}"
    assert refused(Seconds("X", 1.0), raw) == message
    assert Seconds("X", 1.0, maximum=86400).read({"X": "86400"}) == 86400


@pytest.mark.parametrize(
    ("raw", "value"), [("4096", 4096), ("8Mi", 8 * 2**20), ("1Gi", 2**30), ("2Ki", 2048)]
)
def test_byte_sizes_plain_or_with_a_binary_suffix(raw: str, value: int) -> None:
    assert ByteSize("X", 1).read({"X": raw}) == value


@pytest.mark.parametrize("raw", ["lots", "0", "0Mi", "-5", "8MB", "8 Mi", "1.5Gi"])
def test_a_bad_byte_size(raw: str) -> None:
    message = f"X: expected a positive number of bytes (e.g. 8388608 or 8Mi), got {raw!r}"
    assert refused(ByteSize("X", 1), raw) == message


# --------------------------------------------------------------------------------- each server's settings


def test_the_hook_settings_default_to_what_the_server_always_used() -> None:
    assert HookSettings.from_env({}) == HookSettings(
        sync=Settings(),
        limits=HookLimits(128 * 2**20, 1280 * 2**20, 64 * 2**20),
        listener=Listener("0.0.0.0:8080", workers=2, threads=8, max_connections=1000, deadlines=Deadlines()),
        metrics=MetricsPort("0.0.0.0:8081", MetricsLimits()),
        kubeconfig="",
    )


def test_the_hook_settings_follow_the_environment() -> None:
    env = {
        "TRAINOP_HOOK_BIND": "127.0.0.1:9",
        "TRAINOP_HOOK_WORKERS": "3",
        "TRAINOP_HOOK_THREADS": "4",
        "TRAINOP_HOOK_MAX_CONNECTIONS": "50",
        "TRAINOP_HOOK_HEADER_TIMEOUT": "2",
        "TRAINOP_HOOK_MAX_BODY_BYTES": "1000",
        "TRAINOP_HOOK_MAX_INFLIGHT_BYTES": "1Gi",
        "TRAINOP_HOOK_MAX_RESPONSE_BYTES": "2000",
        "TRAINOP_HOOK_METRICS_BIND": "",
        "TRAINOP_HOOK_METRICS_TIMEOUT": "3",
        "TRAINOP_KUBECONFIG": "/k",
        "TRAINOP_GANG_SCHEDULER": "volcano",
        "TRAINOP_PYTORCH_INIT_MAX_TRIES": "7",
    }
    s = HookSettings.from_env(env)
    assert (s.listener.bind, s.listener.workers, s.listener.threads, s.listener.max_connections) == (
        "127.0.0.1:9",
        3,
        4,
        50,
    )
    assert s.listener.deadlines.header_seconds == 2
    assert s.limits == HookLimits(1000, 2**30, 2000)
    assert s.metrics == MetricsPort("", MetricsLimits(timeout_seconds=3))
    assert s.kubeconfig == "/k"
    assert (s.sync.gang_scheduler, s.sync.pytorch_init_max_tries) == ("volcano", 7)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("TRAINOP_HOOK_THREADS", "abc"),
        ("TRAINOP_HOOK_WORKERS", "0"),
        ("TRAINOP_HOOK_MAX_BODY_BYTES", "-1"),
        ("TRAINOP_HOOK_MAX_RESPONSE_BYTES", "big"),
        ("TRAINOP_HOOK_MAX_INFLIGHT_BYTES", "1e9"),
        ("TRAINOP_PYTORCH_INIT_MAX_TRIES", "many"),
        ("TRAINOP_HOOK_METRICS_BIND", "nowhere"),
    ],
)
def test_a_bad_hook_setting_is_named(name: str, raw: str) -> None:
    with pytest.raises(SettingError, match=rf"^{name}: expected .*, got '{raw}'$"):
        HookSettings.from_env({name: raw})


def test_the_webhook_settings_default_to_what_the_server_always_used() -> None:
    assert WebhookSettings.from_env({}) == WebhookSettings(
        limits=WebhookLimits(8 * 2**20, 96 * 2**20),
        listener=Listener("0.0.0.0:9443", workers=2, threads=16, max_connections=1000, deadlines=Deadlines()),
        metrics=MetricsPort("0.0.0.0:8082", MetricsLimits()),
        tls=ServingCert("", ""),
        log_level="info",
    )


def test_the_webhook_serves_tls_with_both_files_or_neither() -> None:
    both = {"TRAINOP_TLS_CERT_FILE": "/c", "TRAINOP_TLS_KEY_FILE": "/k"}
    assert WebhookSettings.from_env(both).tls == ServingCert("/c", "/k")
    with pytest.raises(
        SettingError, match=r"^TRAINOP_TLS_KEY_FILE: expected a file beside TRAINOP_TLS_CERT_FILE"
    ):
        WebhookSettings.from_env({"TRAINOP_TLS_CERT_FILE": "/c"})
    with pytest.raises(
        SettingError, match=r"^TRAINOP_TLS_CERT_FILE: expected a file beside TRAINOP_TLS_KEY_FILE"
    ):
        WebhookSettings.from_env({"TRAINOP_TLS_KEY_FILE": "/k"})


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("TRAINOP_WEBHOOK_THREADS", "x"),
        ("TRAINOP_WEBHOOK_MAX_BODY_BYTES", "lots"),
        ("TRAINOP_WEBHOOK_MAX_INFLIGHT_BYTES", "0"),
        ("TRAINOP_WEBHOOK_CERT_MODE", "self"),
        ("TRAINOP_WEBHOOK_LOG_LEVEL", "chatty"),
        ("TRAINOP_WEBHOOK_HANDSHAKE_TIMEOUT", "never"),
    ],
)
def test_a_bad_webhook_setting_is_named(name: str, raw: str) -> None:
    with pytest.raises(SettingError, match=rf"^{name}: expected .*, got '{raw}'$"):
        WebhookSettings.from_env({name: raw})


def test_the_certificate_keeper_reads_its_kubeconfig_with_its_settings() -> None:
    env = {
        "TRAINOP_WEBHOOK_NAMESPACE": "ns",
        "TRAINOP_WEBHOOK_CERT_SECRET": "s",
        "TRAINOP_WEBHOOK_SERVICE": "svc",
        "TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS": "v",
    }
    assert CertSettings.from_env(env).kubeconfig == ""
    assert CertSettings.from_env({**env, "TRAINOP_KUBECONFIG": "/k"}).kubeconfig == "/k"


def test_the_ui_settings_take_the_environment_over_their_options() -> None:
    options = UiSettings(writable=True)
    assert options.with_env({}) == options
    env = {"TRAINOP_UI_MAX_CONNECTIONS": "9", "TRAINOP_UI_BODY_TIMEOUT": "1", "TRAINOP_KUBECONFIG": "/k"}
    s = options.with_env(env)
    assert (s.writable, s.max_connections, s.deadlines.body_seconds, s.kubeconfig) == (True, 9, 1.0, "/k")
    with pytest.raises(SettingError, match=r"^TRAINOP_UI_MAX_CONNECTIONS: expected a positive integer"):
        options.with_env({"TRAINOP_UI_MAX_CONNECTIONS": "lots"})


# ------------------------------------------------------------------------------------- start-up, for real


# The extensions' cluster settings: both servers read them, so a bad one stops either.
BAD_EXTENSION_SETTINGS = [
    ("TRAINOP_DEFAULT_LOG_FORMAT", "xml"),
    ("TRAINOP_DEFAULT_PARAMETER_SERVER", "yes"),
    ("TRAINOP_PLACEMENT_DEFAULTS", "PS=scatter"),
    ("TRAINOP_TENSORBOARD_KEEP_AFTER", "1 week"),
    ("TRAINOP_TENSORBOARD_KEEP_AFTER", "31d"),
    ("TRAINOP_TENSORBOARD_INGRESS_FROM", '{"podSelector": {}}'),
    ("TRAINOP_ACCELERATOR_PROFILES", "/nonexistent/profiles.yaml"),
]


@pytest.mark.parametrize("settings", [HookSettings, WebhookSettings])
@pytest.mark.parametrize(("name", "raw"), BAD_EXTENSION_SETTINGS)
def test_a_bad_extension_setting_is_named_by_both_servers(
    settings: type[HookSettings] | type[WebhookSettings], name: str, raw: str
) -> None:
    with pytest.raises(SettingError, match=rf"^{name}: expected .*, got '{raw}'$"):
        settings.from_env({name: raw})


def test_the_extensions_default_settings_start_both_servers() -> None:
    good = {
        "TRAINOP_DEFAULT_LOG_FORMAT": "json",
        "TRAINOP_DEFAULT_PARAMETER_SERVER": "true",
        "TRAINOP_PLACEMENT_DEFAULTS": "PS=spread,Worker=pack-preferred:topology.kubernetes.io/zone",
        "TRAINOP_TENSORBOARD_KEEP_AFTER": "24h",
        "TRAINOP_TENSORBOARD_INGRESS_FROM": '[{"namespaceSelector": {}}]',
    }
    assert HookSettings.from_env(good) == HookSettings.from_env({})
    assert WebhookSettings.from_env(good) == WebhookSettings.from_env({})


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    for name in ("TRAINOP_KUBECONFIG", "TRAINOP_TLS_CERT_FILE", "TRAINOP_TLS_KEY_FILE"):
        full.pop(name, None)
    return subprocess.run(argv, cwd=REPO, env=full, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("which", "name", "raw"),
    [
        ("hooks", "TRAINOP_HOOK_THREADS", "abc"),
        ("hooks", "TRAINOP_HOOK_MAX_BODY_BYTES", "lots"),
        ("webhooks", "TRAINOP_WEBHOOK_WORKERS", "0"),
        ("webhooks", "TRAINOP_WEBHOOK_MAX_INFLIGHT_BYTES", "-1"),
        ("hooks", "TRAINOP_PLACEMENT_DEFAULTS", "Worker=spread:"),
        ("webhooks", "TRAINOP_DEFAULT_LOG_FORMAT", "yaml"),
    ],
)
def test_a_bad_value_stops_the_server_at_start_up_naming_the_variable(
    which: str, name: str, raw: str
) -> None:
    argv = [sys.executable, "-m", "gunicorn", "-c", f"python:{which}.gunicorn_conf", f"{which}.app:app"]
    result = _run(argv, **{name: raw})
    assert result.returncode != 0
    message = f"trainop {which}: {name}: expected "
    assert message in result.stderr
    assert f"got '{raw}'" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Booting worker" not in result.stderr


def test_a_bad_value_stops_the_cluster_ui_before_it_serves() -> None:
    trainop = "import sys; from trainop.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", trainop, "ui", "--cluster", "--port", "0"]
    result = _run(argv, TRAINOP_UI_HEADER_TIMEOUT="0")
    assert result.returncode == 2
    assert "TRAINOP_UI_HEADER_TIMEOUT: expected a number of seconds above 0 and at most 3600, got '0'" in (
        result.stderr
    )


def test_the_certificate_keeper_stops_on_a_bad_value() -> None:
    argv = [sys.executable, "-m", "webhooks.certrotate", "--check"]
    env = {
        "TRAINOP_WEBHOOK_NAMESPACE": "ns",
        "TRAINOP_WEBHOOK_CERT_SECRET": "s",
        "TRAINOP_WEBHOOK_SERVICE": "svc",
        "TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS": "v",
        "TRAINOP_WEBHOOK_CERT_CHECK_SECONDS": "soon",
    }
    result = _run(argv, **env)
    assert result.returncode == 2
    message = "TRAINOP_WEBHOOK_CERT_CHECK_SECONDS: expected a number of seconds above 0 and at most 86400"
    assert message in result.stderr
