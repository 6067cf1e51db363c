"""Kafka's own Java code as an oracle: compile a reference program (``tests/kafka/*.java``)
against a distribution's jars and run it on input files (the lz4 and snappy parity tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def run_java_reference(dist: Path, source: Path, work: Path, inputs: dict[str, bytes],
                       *args: str) -> dict[str, Path]:
    """Compile ``source`` with ``dist``'s ``libs/*`` into ``work``, write each input to a file
    there and run the class named like ``source`` with ``args`` then the files' paths; returns
    each input's file (the program writes its outputs beside them). Fails the test, one line,
    without a JDK."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        pytest.fail(f"{source.name} needs java and javac (a JDK 17)", pytrace=False)
    classpath = f"{dist}/libs/*"
    subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(work), str(source)], check=True)
    files = {}
    for index, (name, value) in enumerate(inputs.items()):
        files[name] = work / f"in{index}"
        files[name].write_bytes(value)
    subprocess.run([java, "-cp", f"{work}:{classpath}", source.stem, *args, *map(str, files.values())],
                   check=True, timeout=300)
    return files
