"""Moved to :mod:`lazyconv.logdir.transactions` and :mod:`lazyconv.logdir.txnindex`:
these names stay only until their users import them from there."""

from lazyconv.logdir.naming import TXNINDEX_SUFFIX
from lazyconv.logdir.transactions import PartitionTransactions
from lazyconv.logdir.txnindex import (
    TXNINDEX_ENTRY_SIZE,
    AbortedTxn,
    encode_txnindex_entry,
    parse_txnindex,
)

__all__ = ["AbortedTxn", "PartitionTransactions", "parse_txnindex", "encode_txnindex_entry",
           "TXNINDEX_SUFFIX", "TXNINDEX_ENTRY_SIZE"]
