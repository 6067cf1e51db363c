"""Remote jobs for tests of the sender processes: importable by name in a sender process (the
sender unpickles them), which runs with the repository as its working directory."""

from __future__ import annotations

from lazyconv._send import BytesSend, Send
from lazyconv.errors import CorruptRecordError
from lazyconv.net._remote_send import RemoteJob, SenderContext


class BytesJob(RemoteJob):
    """``size`` bytes of ``fill``, framed as a response would be (int32 size first)."""

    def __init__(self, size: int, fill: int = 0x61) -> None:
        self.size = size
        self.fill = fill
        self.closed = False

    def start(self, context: SenderContext) -> Send:
        starts = context.shared("starts", lambda: [0])
        starts[0] += 1
        return BytesSend(self.size.to_bytes(4, "big") + bytes([self.fill]) * self.size)

    def details(self) -> dict[str, int]:
        return {"size": self.size}


class RefusedJob(RemoteJob):
    """A job the sender cannot begin (as a segment file that is gone)."""

    def start(self, context: SenderContext) -> Send:
        raise FileNotFoundError("segment 00000000000000000000.log is gone")


class BreaksMidwayJob(RemoteJob):
    """A send that raises a LazyconvError after ``good`` bytes (a bug or corrupt data that the
    send cannot pad)."""

    def __init__(self, good: int) -> None:
        self.good = good

    def start(self, context: SenderContext) -> Send:
        return _Breaking(self.good)


class _Breaking(Send):
    def __init__(self, good: int) -> None:
        self._good = good
        self._written = 0

    @property
    def size(self) -> int:
        return self._good * 2

    @property
    def written(self) -> int:
        return self._written

    def write_to(self, channel) -> int:  # type: ignore[no-untyped-def]
        if self._written >= self._good:
            raise CorruptRecordError("corrupt batch at position 12", 12)
        n = channel.send(b"x" * (self._good - self._written))
        self._written += n
        return n


def _refuse_to_load() -> RemoteJob:
    raise RuntimeError("this job cannot be loaded here")


class UnloadableJob(RemoteJob):
    """A job the sender cannot even unpickle (a serving process newer than its senders)."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_refuse_to_load, ())

    def start(self, context: SenderContext) -> Send:
        raise AssertionError("never loaded")


class SleepThenBytesJob(BytesJob):
    """Keeps the sender busy for ``seconds`` before its bytes (a slow disk, a huge batch)."""

    def __init__(self, size: int, seconds: float, padding: int = 0) -> None:
        super().__init__(size)
        self.seconds = seconds
        self.padding = b"p" * padding  # a larger job message, to fill the control socket sooner

    def start(self, context: SenderContext) -> Send:
        import time

        time.sleep(self.seconds)
        return super().start(context)


class UnreadableReportJob(BytesJob):
    """A job whose report the serving process cannot load (a sender speaking nonsense)."""

    def details(self) -> object:
        return UnloadableJob()
