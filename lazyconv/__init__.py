"""lazyconv: Kafka record formats, KIP-283 lazy down-conversion and a lazy FetchResponse encoder.

The names below are the stable public API (see the documentation's API reference); everything
else lives in modules whose layout may change between minor releases.

Reading and writing records::

    from lazyconv import Compression, FileRecords, MemoryRecords, RecordsBuilder

Down-converting them for an old consumer, eagerly or lazily::

    from lazyconv import LazyDownConvertedRecords, down_convert, drain

Answering a Fetch::

    from lazyconv import FetchRequest, FetchResponse
"""

from lazyconv._send import Channel, Send, drain
from lazyconv._types import Records, SendableRecords
from lazyconv._version import __version__
from lazyconv.conversion._down import (
    ConversionStats,
    ConvertedRecords,
    down_convert,
    down_convert_file,
)
from lazyconv.conversion._lazy_records import LazyDownConvertedRecords
from lazyconv.errors import (
    ConfigurationError,
    CorruptRecordError,
    ErrorCode,
    LazyconvError,
    ProtocolError,
    RecordsError,
    UnsupportedCompressionError,
)
from lazyconv.protocol._fetch import FetchRequest, FetchResponse
from lazyconv.records import (
    Compression,
    ControlRecordType,
    FileRecords,
    MemoryRecords,
    Record,
    RecordBatch,
    RecordsBuilder,
    TimestampType,
    build_end_txn_marker,
)

__all__ = [
    # records
    "MemoryRecords",
    "FileRecords",
    "RecordsBuilder",
    "Record",
    "RecordBatch",
    "Compression",
    "TimestampType",
    "ControlRecordType",
    "build_end_txn_marker",
    # down-conversion
    "down_convert",
    "down_convert_file",
    "ConvertedRecords",
    "ConversionStats",
    "LazyDownConvertedRecords",
    # sends and the Fetch API
    "Send",
    "drain",
    "FetchRequest",
    "FetchResponse",
    "ErrorCode",
    # typed contracts
    "Records",
    "SendableRecords",
    "Channel",
    # errors (the whole tree is in lazyconv.errors)
    "LazyconvError",
    "RecordsError",
    "CorruptRecordError",
    "UnsupportedCompressionError",
    "ProtocolError",
    "ConfigurationError",
    "__version__",
]
