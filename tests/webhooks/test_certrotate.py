"""`python -m webhooks.certrotate`: the startup probe's check and its command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhooks import certrotate

ENV = {
    "TRAINOP_WEBHOOK_NAMESPACE": "ops",
    "TRAINOP_WEBHOOK_CERT_SECRET": "ops-webhook-cert",
    "TRAINOP_WEBHOOK_SERVICE": "ops-webhooks",
    "TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS": "ops-mutate",
}


@pytest.fixture
def cert_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in {**ENV, "TRAINOP_WEBHOOK_CERT_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    return tmp_path


def test_the_check_fails_until_the_serving_file_is_written(cert_dir: Path) -> None:
    assert certrotate.main(["--check"]) == 1
    (cert_dir / "tls.pem").write_bytes(b"")
    assert certrotate.main(["--check"]) == 1
    (cert_dir / "tls.pem").write_bytes(b"-----BEGIN PRIVATE KEY-----\n")
    assert certrotate.main(["--check"]) == 0


def test_an_unknown_argument_is_a_usage_error(cert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert certrotate.main(["--once"]) == 2
    assert "usage: python -m webhooks.certrotate [--check]" in capsys.readouterr().err


def test_missing_settings_are_named(
    cert_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRAINOP_WEBHOOK_CERT_SECRET")
    assert certrotate.main([]) == 2
    assert "TRAINOP_WEBHOOK_CERT_SECRET: expected a value" in capsys.readouterr().err
