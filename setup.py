"""Build of lazyconv's optional compiled kernel (``lazyconv.records._ckernel``).

Project metadata lives in pyproject.toml; this file only declares the C extension. Building it
is best effort: without a working C compiler (or with ``LAZYCONV_NO_EXTENSIONS=1`` in the
environment) the package installs as pure Python and warns at import.
``LAZYCONV_SANITIZE=1`` builds the extension with AddressSanitizer and UBSan (see
tests/native/fuzz_asan.sh).
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNEL_DIR = os.path.join("lazyconv", "records", "_kernel")
# the C that works on buffers, then the CPython face (one file per concern, init in module.c)
SOURCES = [
    os.path.join(KERNEL_DIR, name)
    for name in (
        "crc.c", "convert.c", "digest.c", "lz4frame.c", "snappy.c", "segment_run.c",
        "module.c", "crc_py.c", "convert_py.c", "compressed_py.c", "record_py.c", "record_iterator.c",
        "plain_iterator.c", "lz4_py.c", "builder_py.c", "digest_py.c", "segment_run_py.c", "chunk_send_py.c",
        "upconvert_py.c", "buffer_py.c", "snappy_py.c",
    )
]


class OptionalBuildExt(build_ext):
    """``build_ext`` that turns a failed compilation into a warning (pure-Python fallback)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "no extension"
            self._warn(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    @staticmethod
    def _warn(exc: BaseException) -> None:
        sys.stderr.write(
            f"WARNING: lazyconv's compiled kernel could not be built ({exc}); "
            "lazyconv will run in pure Python.\n"
        )


def extensions() -> list:
    if os.environ.get("LAZYCONV_NO_EXTENSIONS") == "1":
        return []
    compile_args = ["-O3", "-std=gnu11", "-fvisibility=hidden"]
    link_args: list = []
    if os.environ.get("LAZYCONV_SANITIZE") == "1":
        sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"]
        compile_args = ["-O1", "-std=gnu11", *sanitize]
        link_args = sanitize
    return [
        Extension(
            "lazyconv.records._ckernel",
            sources=SOURCES,
            depends=[
                os.path.join(KERNEL_DIR, name)
                for name in (
                    "crc.h", "convert.h", "digest.h", "digest_py.h", "format.h", "lz4frame.h", "snappy.h", "records_walk.h",
                    "segment_run.h", "segment_run_py.h", "compressed_py.h", "legacy_message.h", "callback_py.h",
                    "wire.h", "module.h", "record_py.h",
                )
            ],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
        )
    ]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
