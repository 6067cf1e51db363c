"""The command line's own help and its page agree with what the commands do (issue 38): every
command has its row in docs/guide/cli.md, and ``lazyconv gateway --help`` names every API the
gateway answers, with its versions, and the Kafka 4 floors it keeps upstream."""

from __future__ import annotations

import argparse
import re

import pytest

from lazyconv._cli import build_parser, main

from .blocks import REPO


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code in (0, None)
    return " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal


def test_every_command_has_a_row_on_the_cli_page() -> None:
    parser = build_parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    commands = set(subparsers[0].choices)
    page = (REPO / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([\w-]+)[ `]", page, re.M))
    assert "gateway" in commands and len(commands) >= 9, commands
    assert commands <= rows, f"docs/guide/cli.md has no row for {sorted(commands - rows)}"


def test_gateway_help_names_every_api_it_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """The help names, with their versions, the APIs the gateway answers or converts itself
    (what it relays depends on the cluster), the floor and the APIs it does not route."""
    from lazyconv.gateway._apis import CONVERTED, NOT_ROUTED, OWN
    from lazyconv.gateway._floor import KAFKA_4_FLOOR
    from lazyconv.protocol import KAFKA_API_BY_KEY
    from lazyconv.protocol._registry import API_BY_KEY

    text = " ".join(_help(capsys, "gateway").split())
    for key in (*OWN, *CONVERTED):
        spec = KAFKA_API_BY_KEY[key]
        top = CONVERTED.get(key, API_BY_KEY[key].max_version if key == 0 else spec.max_version)
        assert f"{spec.name} v{spec.min_version}-{top}" in text, spec.name
    for key, floor in KAFKA_4_FLOOR.items():
        assert f"{KAFKA_API_BY_KEY[key].name} >= {floor}" in text, key
    for key in NOT_ROUTED:
        name = KAFKA_API_BY_KEY[key].name
        assert (name.removeprefix("Sasl") != name and "SASL" in text) or name in text, name
