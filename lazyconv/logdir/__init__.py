"""One model of a Kafka log directory, used by ``serve``, the Spark job, ``dump`` and the fixture
generator alike. Every fact about the files of a log directory is declared in one module here:

- :mod:`~lazyconv.logdir._naming`: partition folders (``TOPIC-PARTITION``), segment and snapshot
  file names (20-digit offsets and suffixes), what a name says;
- :mod:`~lazyconv.logdir._index`: ``.index`` / ``.timeindex`` entries, reading them, and Kafka's
  rule for when a sparse entry is written;
- :mod:`~lazyconv.logdir._txnindex`: ``.txnindex`` entries (aborted transactions);
- :mod:`~lazyconv.logdir._snapshot`: producer snapshots (``.snapshot``);
- :mod:`~lazyconv.logdir._topic_ids`: ``partition.metadata`` (topic ids);
- :mod:`~lazyconv.logdir._checkpoint`: ``recovery-point-offset-checkpoint``;
- :mod:`~lazyconv.logdir._manifest`: ``manifest.json`` (lazyconv's own: what a generated log holds);
- :mod:`~lazyconv.logdir._layout`: a directory's segments as listed (:class:`SegmentFiles`, local
  paths or fsspec URLs), for readers that only need where the files are;
- :mod:`~lazyconv.logdir._entry`, :mod:`~lazyconv.logdir._segment`: a segment's top-level entries,
  scanned from their headers;
- :mod:`~lazyconv.logdir._partition`, :mod:`~lazyconv.logdir._directory`: a partition's log
  (offsets → byte ranges, appends, rolls, flushes) and a whole directory (partitions, topic
  ids, recovery points); :mod:`~lazyconv.logdir._transactions` (aborted transactions, last stable
  offset) and :mod:`~lazyconv.logdir._recovery` (a torn tail cut off, indexes rebuilt, on open);
  :mod:`~lazyconv.logdir._durability` (fsyncs, atomic small files, the background flusher).

Record layouts come from :mod:`lazyconv.records._format`; this layer imports only
:mod:`lazyconv.records` and :mod:`lazyconv.errors` below it.
"""
