from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from webhooks.app import create_app


@pytest.fixture(scope="session")
def client() -> FlaskClient:
    return create_app().test_client()
