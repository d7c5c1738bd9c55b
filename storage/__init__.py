"""odradek storage: partition logs in Kafka's on-disk format (segments, sparse mmap indexes, checkpoints).

Synchronous plain Python; time comes from the caller as ``now_ms``.  Layers follow Kafka:

=====================  ===========================================================================
``file_records``       a segment's ``.log`` file; :class:`~storage.file_records.FileSlice` for sendfile
``index``              ``.index`` / ``.timeindex`` (``OffsetIndex``, ``TimeIndex``), memory-mapped
``txn_index``          ``.txnindex`` (``TransactionIndex``): a segment's aborted transactions, for READ_COMMITTED
``segment``            ``LogSegment``: append, read, recover, roll checks, truncate
``segments``           the sorted segment map (bisect)
``local_log``          ``LocalLog``: segment list, log end offset, recovery point, roll, crash-safe swaps
``log``                ``Log`` (Kafka's UnifiedLog): HW, LSO, epochs, producers, retention, flush policy
``loader``             ``LogLoader``: swap/temp-file cleanup, index checks, recovery after a crash
``epoch``              ``LeaderEpochFileCache`` (``leader-epoch-checkpoint``)
``producer_state``     idempotent/transactional producer state and ``.snapshot`` files
``cleaner``            ``LogCleaner``: compaction with ``.cleaned``/``.swap`` files
``log_manager``        ``LogManager``: every partition of the log dirs, checkpoints, periodic work
``checkpoints``        checkpoint/metadata text files; ``config``: ``LogConfig`` with Kafka's names
``verify``             the scrub (``python -m storage.verify DIR``)
``fileio``             ``FileIO``, the file-I/O layer: ``LogManager(file_io=...)`` (fault injection in tests)
=====================  ===========================================================================

The broker's entry points::

    lm = LogManager(LogManagerConfig.from_props(props), broker_props=props, topic_configs={...})
    lm.startup(now_ms)                                   # off the event loop: may recover logs
    log = lm.get_or_create_log(topic, partition, now_ms=..., topic_id=...)
    info = log.append_as_leader(bytearray_records, leader_epoch, now_ms)   # -> LogAppendInfo
    log.update_high_watermark(log.log_end_offset)        # single node: HW = LEO
    fetch = log.read(offset, max_bytes, FetchIsolation.HIGH_WATERMARK, min_one_message=True)
    os.sendfile(sock, fetch.records.fd, fetch.records.position, fetch.records.length)
    log.fetch_offset_by_timestamp(ts)                     # ListOffsets (-1 latest, -2 earliest, -3 max)
    log.end_offset_for_epoch(epoch)                       # OffsetForLeaderEpoch
    log.maybe_increment_log_start_offset(offset)          # DeleteRecords
    lm.maintenance(now_ms)                                # or lm.start_background()
    lm.shutdown(now_ms)
"""
