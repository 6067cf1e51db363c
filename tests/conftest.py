"""Shared pytest configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from golden_cases import GOLDEN_DIR
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parent.parent

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """``tests/golden``: Kafka's golden cases (part of the repository, never skipped)."""
    assert GOLDEN_DIR.is_dir(), f"{GOLDEN_DIR} is missing: restore it with git checkout"
    return GOLDEN_DIR
