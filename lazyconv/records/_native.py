"""Which implementation of the hot path is in use: the compiled kernel or pure Python.

The compiled kernel (``lazyconv.records._ckernel``, C sources in ``records/_kernel/``) is used
when it was built and ``LAZYCONV_NO_EXTENSIONS`` is not ``1``; otherwise everything runs on the
pure-Python reference code, which is always present and gives the same bytes and errors. If the
extension was expected but cannot be imported, a :class:`RuntimeWarning` says so once.

- :data:`IMPLEMENTATION`: ``"native"`` or ``"python"``.
- :data:`CPU_FEATURES`: the CPU features the kernel uses (``"pclmul"``, ``"sse4.2"``), empty
  in pure Python.
- :data:`kernel`: the extension module, or ``None``.
- :func:`describe`: one line for ``lazyconv --version``.
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings
from types import ModuleType
from typing import Literal

__all__ = ["IMPLEMENTATION", "CPU_FEATURES", "kernel", "describe", "implementation_info"]

log = logging.getLogger(__name__)

NO_EXTENSIONS_ENV = "LAZYCONV_NO_EXTENSIONS"


def _load() -> ModuleType | None:
    if os.environ.get(NO_EXTENSIONS_ENV) == "1":
        return None
    try:
        module = importlib.import_module("lazyconv.records._ckernel")
    except ImportError as exc:
        warnings.warn(
            f"lazyconv's compiled kernel is not available ({exc}); running in pure Python "
            f"(set {NO_EXTENSIONS_ENV}=1 to silence this)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return module


kernel: ModuleType | None = _load()
IMPLEMENTATION: Literal["native", "python"] = "native" if kernel is not None else "python"
CPU_FEATURES: tuple[str, ...] = tuple(kernel.cpu_features()) if kernel is not None else ()


def implementation_info() -> dict[str, object]:
    """The implementation in use: ``{"implementation", "cpu_features", "crc32", "crc32c"}``
    (the CRC entries name the routines in use: ``pclmul``/``sse4.2``/``slice-by-8`` natively,
    ``zlib``/``crc32c-package`` in pure Python)."""
    if kernel is None:
        return {"implementation": "python", "cpu_features": [], "crc32": "zlib", "crc32c": "crc32c-package"}
    crc32_name, crc32c_name = kernel.crc_implementations()
    return {
        "implementation": "native",
        "cpu_features": list(CPU_FEATURES),
        "crc32": crc32_name,
        "crc32c": crc32c_name,
    }


def describe() -> str:
    """One line: the implementation and CPU features in use (``lazyconv --version``)."""
    info = implementation_info()
    if kernel is None:
        return "implementation: python (pure-Python reference)"
    features = " ".join(CPU_FEATURES) or "none"
    return f"implementation: native (cpu features: {features}; crc32: {info['crc32']}, crc32c: {info['crc32c']})"
