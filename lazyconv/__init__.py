"""lazyconv: Kafka record formats, KIP-283 lazy down-conversion and a lazy FetchResponse encoder."""

from lazyconv.errors import LazyconvError

__version__ = "0.1.0"

__all__ = ["LazyconvError", "__version__"]
