"""The ``face`` fixture: each behaviour test runs on the supervisor graph and on
``create_agent`` with ``TurnPlanMiddleware``."""

from __future__ import annotations

import pytest

from tests.unit.middleware.faces import FACES, Face


@pytest.fixture(params=FACES)
def face(request: pytest.FixtureRequest) -> Face:
    return Face(request.param)
