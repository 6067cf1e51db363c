"""Where Kafka's golden cases live: ``tests/golden/`` of this repository (see its README.md).

Every test that compares with Kafka's own output finds the data through this module, so the
cases are never looked up outside the checkout. A missing folder is an error, not a skip: the
data is part of the repository.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


@cache
def manifest() -> dict[str, Any]:
    """``MANIFEST.json``: per case its input and, per conversion, what Kafka produced."""
    path = GOLDEN_DIR / "MANIFEST.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the golden cases are part of the repository; "
            "restore tests/golden/ from git (git checkout -- tests/golden)"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def cases() -> list[dict[str, Any]]:
    """Every case of the manifest, in order."""
    return list(manifest()["cases"])


def case_dirs() -> list[Path]:
    """The folder of every case (each holds ``input.bin`` and Kafka's outputs)."""
    return [GOLDEN_DIR / case["dir"] for case in cases()]
