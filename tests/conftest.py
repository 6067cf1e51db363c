"""Shared pytest configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(os.environ.get("LAZYCONV_SHARED", REPO_ROOT.parent / "shared"))
GOLDEN_DIR = SHARED_DIR / "golden"

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    if not GOLDEN_DIR.is_dir():
        pytest.skip(f"golden cases not found at {GOLDEN_DIR}")
    return GOLDEN_DIR
