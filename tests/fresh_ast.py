"""``ast.parse`` for the tests that read the package's sources, safe beside other threads.

CPython 3.11 keeps the AST constructor's recursion count in the interpreter's ``ast`` state,
shared by every thread: when another thread parses at the same moment (3.11's ``traceback``
parses a source line to place its carets, e.g. a client library thread logging an exception),
``ast.parse`` may fail with ``SystemError: AST constructor recursion depth mismatch``. That
error says nothing about the source, so the parse is made again.
"""

from __future__ import annotations

import ast
import time

__all__ = ["parse"]

_ATTEMPTS = 20


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, made again when another thread's parse disturbed it."""
    for attempt in range(_ATTEMPTS):
        try:
            return ast.parse(source, filename)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == _ATTEMPTS - 1:
                raise
            time.sleep(0.01)
    raise AssertionError("unreachable")
