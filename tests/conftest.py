"""Shared pytest configuration."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from golden_cases import GOLDEN_DIR
from hypothesis import HealthCheck, settings
from kafka_broker import KafkaBroker, KafkaDistError, check_dist, dist_version
from server_thread import serve_logdir as _serve_logdir

REPO_ROOT = Path(__file__).resolve().parent.parent

# The suite keeps its compiled and assertion-rewritten modules (__pycache__, ignored by git) even
# where PYTHONDONTWRITEBYTECODE is set: rewriting and compiling ~300 test modules again on every
# run is most of the quick look's time. Subprocesses keep the environment's own choice.
sys.dont_write_bytecode = False

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(autouse=True)
def _cli_logging_stays_in_its_test() -> Iterator[None]:
    """A test that runs the CLI's main() in-process leaves a root handler writing to that
    test's captured stderr, which pytest closes: later tests' log lines would fail on it
    ("--- Logging error ---"). Each test gets the root logger back as it found it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """``tests/golden``: Kafka's golden cases (part of the repository, never skipped)."""
    assert GOLDEN_DIR.is_dir(), f"{GOLDEN_DIR} is missing: restore it with git checkout"
    return GOLDEN_DIR


# -- the suite on several workers (pytest-xdist, --dist loadgroup) -------------------------
# The whole suite runs on several processes (README: `pytest -n 4 --dist loadgroup`): most of
# the broker tests' time is waiting (for JVMs, for clients' timeouts, for leader moves), which
# other tests can use. Tests that share a costly session or module resource run on one worker,
# so that it is made once: each broker family (the session broker and Kafka 3.9's, the 3-node
# cluster, the secured brokers), the local Spark session, each old-client module (its served
# log directory) and the docs' shell sessions (which use fixed paths such as /tmp/fx).
_SECURED_FIXTURES = frozenset({"secured_kafka", "secured_kafka_4", "secured_kafka_3"})


def _worker_group(item: pytest.Item) -> str | None:
    path = Path(str(item.path)).resolve().relative_to(REPO_ROOT).as_posix()
    names = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("kafka") is not None:
        if names & _SECURED_FIXTURES or path.startswith("tests/security/"):
            return "kafka-secured"
        if "kafka_cluster" in names:
            return "kafka-cluster"
        return "kafka"
    if item.get_closest_marker("spark") is not None:
        return "spark"
    if path.startswith("tests/docs/"):
        return "docs"
    if path.startswith(("tests/oldclients/", "tests/interop/")):
        return path
    return None


# The longest tests that share nothing start first, so that no worker is left running one of
# them after the others are done (seconds on CI's two cores, with the suite on four workers).
_LONG_FIRST = (
    "tests/house/test_reference_implementation.py::test_pure_python_reference_passes_the_suite",  # ~900
    "tests/gateway/test_gateway_memory.py::test_ten_thousand_idle_connections",  # ~550
    "tests/house/test_wheel.py",  # ~250 with its set-up
    "tests/native/test_fuzz_asan.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        for index, prefix in enumerate(_LONG_FIRST):
            if item.nodeid.startswith(prefix):
                return index
        return len(_LONG_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
    if config.pluginmanager.hasplugin("rerunfailures"):
        for item in items:
            if _LIVE_MARKERS.intersection(m.name for m in item.iter_markers()) and \
                    item.get_closest_marker("flaky") is None:
                item.add_marker(pytest.mark.flaky(reruns=LIVE_RERUNS, reruns_delay=2))


# Tests against live brokers and real clients (JVMs, multi-node clusters, client threads that
# time out) fail now and then on a loaded CI machine (four workers, several JVMs, two cores)
# for reasons outside the code under test: a client's 30 s timeout while the machine is
# starved, a coordinator still loading. Each gets one more try, as Apache Kafka's own build
# retries its integration tests; it fails when it fails twice, and pytest's summary lists
# every rerun ("R"), so a flaky test stays visible. Nothing else is retried.
_LIVE_MARKERS = frozenset({"kafka", "interop"})
LIVE_RERUNS = 1


def pytest_configure(config: pytest.Config) -> None:
    # The first try's traceback in the "rerun test summary info" section (pytest-rerunfailures
    # 16.3+): a rerun that passes still says why the first try failed, and one that fails
    # again shows both causes, not only the second try's (which may fail only because the
    # first left something behind).
    if hasattr(config.option, "rerun_show_tracebacks"):
        config.option.rerun_show_tracebacks = True


def pytest_itemcollected(item: pytest.Item) -> None:
    # as each test is collected: before xdist's own collection hook reads the groups
    config = item.config
    # xdist's workers see dist "no" and their own loadgroup flag; the controller sees dist
    if not (getattr(config.option, "loadgroup", False)
            or getattr(config.option, "dist", "no") == "loadgroup"):
        return
    group = _worker_group(item)
    if group is not None and item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(group))


# -- real Kafka brokers (marker `kafka`) ---------------------------------------------------
# Distributions come from the environment (.ci/run sets them when the CI machine has them); any
# Apache Kafka binary distribution folder works (libs/*.jar, config/). Tests using these
# fixtures carry @pytest.mark.kafka.

KAFKA_DIST_ENV = "LAZYCONV_KAFKA_DIST"  # the Kafka 4.x target
KAFKA_DIST_3_ENV = "LAZYCONV_KAFKA_DIST_3"  # a 3.x broker that still down-converts
KAFKA_OLD_CLIENTS_ENV = "LAZYCONV_KAFKA_OLD_CLIENTS"  # <version>/kafka-clients-<version>.jar …

# tests/kafka is a folder of rootless test modules: an __init__.py there would make it a
# package named `kafka` ahead of kafka-python on sys.path, and every `import kafka` in the
# session would get the tests instead
if (Path(__file__).parent / "kafka" / "__init__.py").exists():
    raise RuntimeError(
        "tests/kafka/__init__.py shadows kafka-python (`import kafka`): delete it; "
        "tests/kafka must stay a folder without __init__.py"
    )


def _kafka_dist_from_env(var: str, kafka_4: bool) -> Path:
    value = os.environ.get(var)
    if not value:
        pytest.skip(f"{var} is not set: no Kafka distribution to test against")
    problem = ""
    try:
        dist = check_dist(Path(value))
        version = dist_version(dist)
    except KafkaDistError as e:
        problem = str(e)
    else:
        major = int(version.split(".")[0])
        if kafka_4 and major < 4:
            problem = f"it is Kafka {version}, not Kafka 4 or newer"
        elif not kafka_4 and major != 3:
            problem = f"it is Kafka {version}, not a Kafka 3.x"
    if problem:
        pytest.fail(f"{var}={value}: {problem}", pytrace=False)
    return dist


@pytest.fixture(scope="session")
def kafka_dist() -> Path:
    """The Kafka 4.x distribution folder from ``LAZYCONV_KAFKA_DIST`` (skips when unset)."""
    return _kafka_dist_from_env(KAFKA_DIST_ENV, kafka_4=True)


@pytest.fixture(scope="session")
def kafka_dist_3() -> Path:
    """A Kafka 3.x distribution folder from ``LAZYCONV_KAFKA_DIST_3`` (skips when unset)."""
    return _kafka_dist_from_env(KAFKA_DIST_3_ENV, kafka_4=False)


@pytest.fixture(scope="session")
def kafka_broker(kafka_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running single-node Kafka 4.x broker for the whole session (stopped at its end).
    Shared: do not stop, restart or reconfigure it; crash tests make their own with
    ``kafka_broker_factory``."""
    broker = KafkaBroker(kafka_dist, tmp_path_factory.mktemp("kafka-4") / "broker")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_broker_3(kafka_dist_3: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running single-node Kafka 3.x broker with the request log on (every request in
    ``request_log_entries()``), for the whole session."""
    broker = KafkaBroker(kafka_dist_3, tmp_path_factory.mktemp("kafka-3") / "broker",
                         request_log=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_broker_factory(tmp_path: Path) -> Iterator[Callable[..., KafkaBroker]]:
    """``make(dist, **KafkaBroker kwargs) -> KafkaBroker``: a started broker of the test's own
    (workdir under tmp_path), stopped when the test ends: for restart and crash tests."""
    brokers: list[KafkaBroker] = []

    def make(dist: Path, *, start: bool = True, **kwargs: Any) -> KafkaBroker:
        broker = KafkaBroker(dist, tmp_path / f"kafka-{len(brokers) + 1}", **kwargs)
        brokers.append(broker)
        return broker.start() if start else broker

    yield make
    for broker in brokers:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_old_clients() -> Path:
    """The folder of old Kafka Java clients from ``LAZYCONV_KAFKA_OLD_CLIENTS``:
    ``<version>/kafka-clients-<version>.jar`` plus its runtime jars (skips when unset)."""
    value = os.environ.get(KAFKA_OLD_CLIENTS_ENV)
    if not value:
        pytest.skip(f"{KAFKA_OLD_CLIENTS_ENV} is not set: no old Kafka Java clients to test with")
    folder = Path(value).expanduser().resolve()
    if not folder.is_dir() or not any(folder.glob("*/kafka-clients-*.jar")):
        pytest.fail(f"{KAFKA_OLD_CLIENTS_ENV}={value}: no <version>/kafka-clients-<version>.jar "
                    "in it", pytrace=False)
    return folder


@pytest.fixture
def sized_conversion_cache():
    """The process's conversion cache sized to 8 MiB for one test (it is off in library use),
    then as it was."""
    from lazyconv.conversion._cache import conversion_cache

    saved = conversion_cache.max_bytes
    conversion_cache.resize(8 << 20)
    try:
        yield conversion_cache
    finally:
        conversion_cache.resize(saved)


@pytest.fixture
def serve_logdir() -> Iterator[Callable[..., Any]]:
    """Factory: ``serve_logdir(path, **broker_kwargs)`` starts a ``serve`` server in a thread
    (:class:`server_thread.ServerThread`), stopped at teardown."""
    yield from _serve_logdir()


@pytest.fixture
def served_fixtures(tmp_path: Path) -> Path:
    """A copy of the committed broker-layout fixture (every codec, transactions, ...)."""
    target = tmp_path / "logs"
    shutil.copytree(REPO_ROOT / "fixtures", target)
    return target
