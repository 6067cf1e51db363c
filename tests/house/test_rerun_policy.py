"""The suite's rerun policy (tests/conftest.py): only tests against live brokers or real
clients (markers ``kafka``, ``interop``) get one more try; nothing else is retried."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

_ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@pytest.fixture
def conftest(request: pytest.FixtureRequest) -> ModuleType:
    """tests/conftest.py as pytest loaded it: ``import conftest`` would give whichever of the
    suite's conftest modules (tests/partitioner/, tests/kafka/, ...) sys.path finds first."""
    for plugin in request.config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and getattr(plugin, "__file__", None) and \
                Path(plugin.__file__).resolve() == _ROOT_CONFTEST:
            return plugin
    raise AssertionError(f"pytest did not load {_ROOT_CONFTEST}")


class _Item:
    def __init__(self, nodeid: str, *marks: pytest.MarkDecorator) -> None:
        self.nodeid = nodeid
        self.marks = [m.mark for m in marks]

    def iter_markers(self):
        return iter(self.marks)

    def get_closest_marker(self, name: str):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.mark)


class _Plugins:
    def __init__(self, present: bool) -> None:
        self.present = present

    def hasplugin(self, name: str) -> bool:
        return self.present and name == "rerunfailures"


class _Config:
    def __init__(self, present: bool) -> None:
        self.pluginmanager = _Plugins(present)


def _reruns(item: _Item) -> int | None:
    mark = item.get_closest_marker("flaky")
    return None if mark is None else mark.kwargs["reruns"]


def test_only_live_tests_get_one_more_try(conftest: ModuleType) -> None:
    broker = _Item("tests/kafka/test_a.py::t", pytest.mark.kafka)
    client = _Item("tests/interop/test_b.py::t", pytest.mark.interop)
    unit = _Item("tests/records/test_c.py::t")
    slow = _Item("tests/records/test_d.py::t", pytest.mark.slow)
    own = _Item("tests/kafka/test_e.py::t", pytest.mark.kafka, pytest.mark.flaky(reruns=3))
    conftest.pytest_collection_modifyitems(_Config(True), [broker, client, unit, slow, own])
    assert (_reruns(broker), _reruns(client)) == (conftest.LIVE_RERUNS, conftest.LIVE_RERUNS) == (1, 1)
    assert _reruns(unit) is None and _reruns(slow) is None
    assert _reruns(own) == 3  # a test's own policy is kept


def test_without_the_plugin_nothing_is_marked(conftest: ModuleType) -> None:
    broker = _Item("tests/kafka/test_a.py::t", pytest.mark.kafka)
    conftest.pytest_collection_modifyitems(_Config(False), [broker])
    assert _reruns(broker) is None
