"""One model of a Kafka log directory, used by ``serve``, the Spark job, ``dump`` and the fixture
generator alike. Every fact about the files of a log directory is declared in one module here:

- :mod:`~lazyconv.logdir.naming`: partition folders (``TOPIC-PARTITION``), segment and snapshot
  file names (20-digit offsets and suffixes), what a name says;
- :mod:`~lazyconv.logdir.index`: ``.index`` / ``.timeindex`` entries, reading them, and Kafka's
  rule for when a sparse entry is written;
- :mod:`~lazyconv.logdir.txnindex`: ``.txnindex`` entries (aborted transactions);
- :mod:`~lazyconv.logdir.snapshot`: producer snapshots (``.snapshot``);
- :mod:`~lazyconv.logdir.topic_ids`: ``partition.metadata`` (topic ids);
- :mod:`~lazyconv.logdir.checkpoint`: ``recovery-point-offset-checkpoint``;
- :mod:`~lazyconv.logdir.manifest`: ``manifest.json`` (lazyconv's own: what a generated log holds);
- :mod:`~lazyconv.logdir.layout`: a directory's segments as listed (:class:`SegmentFiles`, local
  paths or fsspec URLs), for readers that only need where the files are;
- :mod:`~lazyconv.logdir.entry`, :mod:`~lazyconv.logdir.segment`: a segment's top-level entries,
  scanned from their headers;
- :mod:`~lazyconv.logdir.partition`, :mod:`~lazyconv.logdir.directory`: a partition's log
  (offsets → byte ranges, appends, rolls, flushes) and a whole directory (partitions, topic
  ids, recovery points); :mod:`~lazyconv.logdir.transactions` (aborted transactions, last stable
  offset) and :mod:`~lazyconv.logdir.recovery` (a torn tail cut off, indexes rebuilt, on open);
  :mod:`~lazyconv.logdir.durability` (fsyncs, atomic small files, the background flusher).

Record layouts come from :mod:`lazyconv.records._format`; this layer imports only
:mod:`lazyconv.records` and :mod:`lazyconv.errors` below it.
"""
