"""The checks Kafka makes on a producer's top-level entries before it converts or appends them,
in one place for both directions that need them: ``serve``'s append validation
(:mod:`lazyconv.serve._append_validation`) and the gateway's up-conversion of old producers'
message sets (:mod:`lazyconv.conversion._up`).

Kafka's facts (``UnifiedLog.analyzeAndValidateRecords`` for each top-level entry,
``LogValidator.validateBatch`` for a producer's v2 batch): a v2 batch from a client starts at
base offset 0; each entry's CRC holds (CRC-32C over a v2 batch from its attributes, CRC-32 over
a legacy message from its magic byte); its codec id is one Kafka knows (0..4); a v2 batch's
offset range matches its record count, it is no control batch, and a producer id comes with a
sequence.

Each check raises a typed :mod:`lazyconv.errors` exception whose message is Kafka's own wording
(a Produce v8+ response carries it as ``error_message``), positioned at the entry. What a caller
answers for each is its policy, stated where it calls them:

- ``serve`` answers as a Kafka broker's append path does: INVALID_RECORD for the base offset
  and the header checks, CORRUPT_MESSAGE for the CRC and an unknown codec id (where Kafka fails
  with an internal error), and adds its own size limit (``max.message.bytes``) between the two;
- up-conversion answers what a Kafka 3.9 broker answered old producers (measured:
  :func:`lazyconv.conversion._up.kafka_error_code`): an unknown codec id is
  UNKNOWN_SERVER_ERROR there, and the size limit is left to the Kafka 4 broker.
"""

from __future__ import annotations

from lazyconv.errors import CorruptRecordError, InvalidRecordError
from lazyconv.records._batch import DefaultBatch
from lazyconv.records._format import BASE_OFFSET_OFFSET, CRC_OFFSET, Compression
from lazyconv.records._types import RecordBatch

__all__ = ["check_client_base_offset", "check_entry", "check_client_batch_header"]


def check_client_base_offset(batch: RecordBatch) -> None:
    """A producer's v2 batch has base offset 0 (the broker assigns offsets); legacy messages
    are not checked (their offsets are rewritten)."""
    if batch.magic >= 2 and batch.base_offset != 0:
        raise InvalidRecordError(
            "The baseOffset of the record batch in the append should be 0, but it is "
            f"{batch.base_offset}", batch.position + BASE_OFFSET_OFFSET)


def check_entry(batch: RecordBatch) -> Compression:
    """One top-level entry's integrity, in Kafka's order: the CRC (a legacy message's key and
    value lengths too), then the codec id; returns the codec.

    Raises :class:`~lazyconv.errors.CorruptRecordError` for a CRC that does not match or
    lengths that do not fit the message, :class:`~lazyconv.errors.UnknownCompressionError` for
    a codec id of 5..7.
    """
    if isinstance(batch, DefaultBatch):
        computed = batch.compute_crc()
        if computed != batch.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {batch.crc}, computed crc = {computed})",
                batch.position + CRC_OFFSET)
    else:
        try:
            batch.validate()
        except (CorruptRecordError, InvalidRecordError) as exc:  # lengths too: corruption
            raise CorruptRecordError(f"Record is corrupt: {exc}", exc.position) from None
    return batch.compression


def check_client_batch_header(batch: DefaultBatch) -> None:
    """``LogValidator.validateBatch`` for a producer's v2 batch: an offset range that matches a
    positive record count, no control batch, a sequence when there is a producer id. Raises
    :class:`~lazyconv.errors.InvalidRecordError` with Kafka's message."""
    count_from_offsets = batch.last_offset_delta + 1
    problem = None
    if count_from_offsets <= 0:
        problem = f"Batch has an invalid offset range: [{batch.base_offset}, {batch.last_offset}]"
    elif batch.record_count <= 0:
        problem = f"Invalid reported count for record batch: {batch.record_count}"
    elif count_from_offsets != batch.record_count:
        problem = (f"Inconsistent batch offset range [{batch.base_offset}, {batch.last_offset}] "
                   f"and count of records {batch.record_count}")
    elif batch.is_control:
        problem = "Clients are not allowed to write control records"
    elif batch.producer_id >= 0 and batch.base_sequence < 0:
        problem = (f"Invalid sequence number {batch.base_sequence} in record batch with "
                   f"producerId {batch.producer_id}")
    if problem is not None:
        raise InvalidRecordError(problem, batch.position)
