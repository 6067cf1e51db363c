"""MkDocs hook: the docstrings' Sphinx cross-reference roles as code.

The docstrings use Sphinx roles (``:class:`~lazyconv.records.MemoryRecords```), which the
Python handler of mkdocstrings prints as they are (":class:" then the name in code). This hook
turns each into the name alone, in code, as Sphinx would show it: the last component when the
target starts with ``~``, the whole dotted path otherwise.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):<code>(~?)([^<]+)</code>")


def _short(match: re.Match[str]) -> str:
    tilde, target = match.group(1), match.group(2)
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **_: Any) -> str:
    return _ROLE.sub(_short, html)
