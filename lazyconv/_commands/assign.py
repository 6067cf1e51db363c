"""``lazyconv assign``: KIP-925 rack-aware task assignment of a JSON-described assignment."""

from __future__ import annotations

import argparse
import json
import sys

from lazyconv._commands._common import finish_progress, input_file, progress_bar

_MAX_INDENT = 16


def _indent(text: str) -> int:
    """``--indent``: 0 to 16 spaces (json.dumps would build lines of any width asked for)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= _MAX_INDENT:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..{_MAX_INDENT}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "assign",
        help="rack-aware task assignment (KIP-925) of a Kafka Streams assignment",
        description=(
            "Read clients (rack, threads), tasks (partitions with replica racks) and the current "
            "balanced assignment from INPUT (JSON), optimize it as Kafka Streams' rack-aware "
            "assignor does (each client keeps its number of active and standby tasks) and print "
            '{"assignment": {CLIENT: {"active": [...], "standby": [...]}}, "cost": {"before": N, '
            '"after": M}}. A task\'s cost on a client is traffic_cost x (its partitions with no '
            "replica in the client's rack) + non_overlap_cost x (1 if it was not there before); "
            "stateless tasks always use 1 and 0."
        ),
    )
    parser.add_argument("input", metavar="INPUT.json", help="input document ('-' reads stdin)")
    parser.add_argument(
        "--strategy",
        choices=("min_traffic", "balance_subtopology"),
        default="min_traffic",
        help=(
            "min_traffic: least cross-rack traffic, starting from the current assignment; "
            "balance_subtopology: also spread each subtopology's tasks over clients in "
            "proportion to their task counts (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--assignor",
        choices=("high_availability", "sticky"),
        default="high_availability",
        help=(
            "whose defaults replace null costs: high_availability (traffic 10, non-overlap 1, "
            "Kafka's default assignor) or sticky (traffic 1, non-overlap 10) (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--semantics",
        choices=("internal", "kip924"),
        default="internal",
        help=(
            "internal: Kafka's RackAwareTaskAssignor as its HighAvailability/sticky assignors run "
            "it; kip924: the public TaskAssignmentUtils of KIP-924 (active traffic counts "
            "changelog partitions too, standbys use the strategy, unset costs mean no "
            "optimization) (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--missing-racks",
        choices=("raise", "keep"),
        default="raise",
        help=(
            "a client without rack or a partition without replica racks (null): raise = refuse "
            "the input; keep = Kafka's behaviour, leave the assignment as it is and say why in "
            "\"skipped\" (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--indent", type=_indent, default=2, metavar="N",
        help="JSON indentation, 0..16; 0 prints one line (default: %(default)s)",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="add a \"phases\" member with each phase's weights, costs and moved-task count",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar on stderr (it only shows on a terminal)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lazyconv.assignment._api import PHASES, assign
    from lazyconv.assignment._errors import AssignmentInputError, MissingRacksError
    from lazyconv.assignment._jsonio import parse_text, result_to_json
    from lazyconv.errors import ValidationError

    try:
        problem = parse_text(_read_input(args.input))
    except AssignmentInputError as exc:  # the document's content: bad data, exit status 1
        raise ValidationError(f"{args.input}: {exc}") from None
    with progress_bar(len(PHASES), "assign", quiet=args.quiet, unit="phase") as bar:

        def phase_done(phase: str) -> None:
            bar.set_postfix_str(phase)
            bar.update(1)

        try:
            result = assign(
                problem, strategy=args.strategy, assignor=args.assignor, on_phase_done=phase_done,
                semantics=args.semantics, missing_racks=args.missing_racks,
            )
        except MissingRacksError as exc:  # the library's hint names its argument, not ours
            raise ValidationError(f"{args.input}: {exc.path}: {exc.gap} (--missing-racks keep "
                                  "leaves the assignment as Kafka does)") from None
        except AssignmentInputError as exc:
            raise ValidationError(f"{args.input}: {exc}") from None
        finish_progress(bar)
    document = result_to_json(result)
    if args.details:
        document["phases"] = [
            {
                "phase": p.phase,
                "traffic_cost": None if p.weights is None else p.weights.traffic_cost,
                "non_overlap_cost": None if p.weights is None else p.weights.non_overlap_cost,
                "before": p.before,
                "after": p.after,
                "moved": p.moved,
                **({"skipped": p.skipped} if p.skipped else {}),
            }
            for p in result.phases
        ]
    print(json.dumps(document, indent=args.indent or None))
    return 0


def _read_input(path: str) -> str:
    """The JSON text of INPUT ('-': stdin); a file that is not UTF-8 text is bad data."""
    from lazyconv.errors import ValidationError

    if path == "-":
        return sys.stdin.read()
    data = input_file(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"{path} is not a JSON document (not UTF-8 text at byte {exc.start})"
        ) from None
