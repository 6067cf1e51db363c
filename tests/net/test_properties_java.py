"""The properties parser against java.util.Properties itself (the JDK on PATH runs a
one-file program): same keys, same values, for the tricky cases and for random texts."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from lazyconv.net._properties import parse_properties
from tests.net.test_properties import JAVA_CASES

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("java") is None,
                                                   reason="no java on PATH")]

PROGRAM = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class LoadProps {
    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String name : args) {
            Properties p = new Properties();
            try (Reader r = Files.newBufferedReader(Paths.get(name), StandardCharsets.UTF_8)) {
                p.load(r);
            } catch (IllegalArgumentException e) {
                out.append("ERROR\n");
                continue;
            }
            List<String> keys = new ArrayList<>(p.stringPropertyNames());
            Collections.sort(keys);
            for (String k : keys) {
                out.append(hex(k)).append(' ').append(hex(p.getProperty(k))).append('\n');
            }
            out.append("END\n");
        }
        System.out.print(out);
    }

    static String hex(String s) {
        StringBuilder b = new StringBuilder("x");
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
}
"""


def _unhex(text: str) -> str:
    units = bytes.fromhex(text[1:])
    return units.decode("utf-16-be", "surrogatepass")


def java_load(tmp_path: Path, texts: list[str]) -> list[dict[str, str] | None]:
    (tmp_path / "LoadProps.java").write_text(PROGRAM)
    names = []
    for i, text in enumerate(texts):
        path = tmp_path / f"case{i}.properties"
        path.write_text(text, encoding="utf-8")
        names.append(str(path))
    done = subprocess.run(["java", str(tmp_path / "LoadProps.java"), *names],
                          capture_output=True, text=True, timeout=120, check=True)
    results: list[dict[str, str] | None] = []
    current: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if line == "ERROR":
            results.append(None)
        elif line == "END":
            results.append(current)
            current = {}
        else:
            k, v = line.split(" ")
            current[_unhex(k)] = _unhex(v)
    return results


def ours(text: str) -> dict[str, str] | None:
    from lazyconv.errors import ConfigurationError

    try:
        return {e.key: e.value for e in parse_properties(text)}
    except ConfigurationError:
        return None


def _eof_quirk(text: str, java: dict[str, str] | None, mine: dict[str, str] | None) -> bool:
    """Java's LineReader turns a continuation cut by the end of the text into an empty line,
    so a text ending in a lone backslash (and a single line end, not CR LF nor blanks) gets a
    key "" there: a reading quirk of no use, not reproduced."""
    if java is None or mine is None or java.get("") != "":
        return False
    return text.rstrip(" \t\f\r\n").endswith("\\") and {**mine, "": ""} == java


ALPHABET = ["a", "b", "=", ":", " ", "\t", "\\", "\n", "\r", "#", "!", "\\u0041", "\\u00", "é",
            "\f", "x", "\\n", "\\t"]


def test_same_as_java(tmp_path: Path) -> None:
    rng = random.Random(39)
    texts = [JAVA_CASES] + ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 40)))
                            for _ in range(5000)]
    expected = java_load(tmp_path, texts)
    mismatches = [(json.dumps(t), e, ours(t)) for t, e in zip(texts, expected, strict=True)
                  if ours(t) != e and not _eof_quirk(t, e, ours(t))]
    assert not mismatches, mismatches[:5]
