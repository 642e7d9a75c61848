"""One replica's log: records (offset, leader_epoch, value), LEO, HW, log start offset, a flushed
watermark and the leader-epoch cache (protocol rules R4.1-R4.2).

A leader in epoch 0 appends two records, then a new leader in epoch 2 appends one; the epoch
cache remembers where each epoch starts, and ``end_offset_for`` answers the question a follower
asks when it wants to know where its epoch ended on the leader:

>>> log = ReplicaLog()
>>> log.append(0, "a"), log.append(0, "b"), log.append(2, "c")
(0, 1, 2)
>>> log.epoch_cache.entries
(EpochEntry(epoch=0, start_offset=0), EpochEntry(epoch=2, start_offset=2))
>>> log.epoch_cache.end_offset_for(1, log.log_end_offset)  # largest epoch <= 1, next start
(0, 2)
>>> log.truncate_to(2)
>>> render_log(log)
'[0:e0 a, 1:e0 b]'

Records are kept in memory; an optional ``LogStorage`` mirrors every change on disk and is what a
restart recovers from. Without storage a hard crash keeps exactly the records below ``flushed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LogRecord(NamedTuple):
    """One record of a replica log, stamped with the leader epoch it was appended under, and
    with the producer id, producer epoch and sequence number of an idempotent producer (-1
    for a producer that is not idempotent, as Kafka's batch header has them)."""

    offset: int
    leader_epoch: int
    value: str
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1


class ProducerFields(NamedTuple):
    """The producer fields of a batch header; -1/-1/-1 for a producer that is not idempotent."""

    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


NO_PRODUCER = ProducerFields()

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the batches per producer a broker keeps
# to answer a retried batch as a duplicate
NUM_BATCHES_TO_RETAIN = 5


class ProducerEntry:
    """What a replica knows of one producer id, rebuilt from its log (Kafka's
    ProducerStateEntry): the producer epoch and the (sequence, offset) of its last five
    batches (one record per batch here).

    >>> entry = ProducerEntry(0)
    >>> for seq in range(7):
    ...     entry.add(0, seq, 10 + seq)
    >>> entry.last_sequence, entry.duplicate_of(0, 1), entry.duplicate_of(0, 5)
    (6, None, 15)
    """

    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: list[tuple[int, int]] = []

    @property
    def last_sequence(self) -> int:
        return self.batches[-1][0] if self.batches else -1

    def add(self, epoch: int, sequence: int, offset: int) -> None:
        """``ProducerStateEntry.addBatch``: a new epoch clears the batches, at most five kept."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            del self.batches[0]
        self.batches.append((sequence, offset))

    def duplicate_of(self, epoch: int, sequence: int) -> int | None:
        """``findDuplicateBatch``: the offset of a retained batch with this epoch and sequence."""
        if epoch != self.epoch:
            return None
        for batch_sequence, offset in self.batches:
            if batch_sequence == sequence:
                return offset
        return None


class EpochEntry(NamedTuple):
    """A leader-epoch cache entry: ``epoch`` started at ``start_offset``."""

    epoch: int
    start_offset: int


class LogStorage(Protocol):
    """Where a replica log keeps its data across a crash (the on-disk seam).

    ``ReplicaLog`` calls ``append`` for every record (with its producer fields),
    ``truncate_to`` whenever its suffix is removed (offsets >= ``end_offset`` go away),
    ``flush`` when the page cache is forced to disk, and ``write_checkpoints`` whenever the high
    watermark or the epoch cache changes. After a crash, ``recover(lose_unflushed)`` returns
    what a restarted broker finds: the records (all appended ones when ``lose_unflushed`` is
    false, otherwise only the flushed ones), the
    checkpointed high watermark and the checkpointed epoch entries.
    """

    def append(
        self,
        offset: int,
        leader_epoch: int,
        value: str,
        timestamp_ms: int | None = None,
        producer: ProducerFields = NO_PRODUCER,
    ) -> None: ...

    def truncate_to(self, end_offset: int) -> None: ...

    def delete_below(self, start_offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def flush(self) -> None: ...

    def write_checkpoints(
        self, high_watermark: int, epoch_entries: Sequence[EpochEntry]
    ) -> None: ...

    def recover(
        self, lose_unflushed: bool, *, torn_tail: bool = False
    ) -> tuple[list[LogRecord], int, list[EpochEntry]]: ...


class LeaderEpochCache:
    """Epoch -> start offset, both columns strictly increasing (Kafka's LeaderEpochFileCache).

    >>> cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(2, 1), EpochEntry(4, 2)])
    >>> cache.end_offset_for(3, log_end_offset=3)
    (2, 2)
    >>> cache.assign(3, 1)  # drops every entry with epoch >= 3 or start >= 1 first
    True
    >>> cache.entries
    (EpochEntry(epoch=0, start_offset=0), EpochEntry(epoch=3, start_offset=1))
    """

    __slots__ = ("_entries", "_snapshot")

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = []
        # the entries as a tuple, built once per change (views read it after every step)
        self._snapshot: tuple[EpochEntry, ...] | None = None
        for entry in entries:
            self.assign(entry.epoch, entry.start_offset)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        if self._snapshot is None:
            self._snapshot = tuple(self._entries)
        return self._snapshot

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (R4.1); True when the cache changed."""
        if self._entries:
            latest = self._entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._snapshot = None
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """``LeaderEpochFileCache.truncateFromStart``: entries that start below ``start_offset``
        go, except the latest of them, which now starts at ``start_offset``.

        >>> cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 8)])
        >>> cache.truncate_from_start(5), cache.entries
        (True, (EpochEntry(epoch=1, start_offset=5), EpochEntry(epoch=2, start_offset=8)))
        """
        below = [entry for entry in self._entries if entry.start_offset < start_offset]
        if not below:
            return False
        kept = [entry for entry in self._entries if entry.start_offset >= start_offset]
        if not kept or kept[0].start_offset != start_offset:
            kept.insert(0, EpochEntry(below[-1].epoch, start_offset))
        self._entries = kept
        self._snapshot = None
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries that start at or after ``end_offset``; True when the cache changed."""
        entries = self._entries
        if not entries or entries[-1].start_offset < end_offset:
            return False  # start offsets increase: nothing starts at or after it
        kept = [entry for entry in entries if entry.start_offset < end_offset]
        changed = len(kept) != len(self._entries)
        self._entries = kept
        self._snapshot = None
        return changed

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest cached epoch <= requested, start offset of the first later epoch or LEO).

        Every branch of R4.2:

        >>> cache = LeaderEpochCache([EpochEntry(2, 5), EpochEntry(4, 9)])
        >>> cache.end_offset_for(-1, 12)  # undefined request
        (-1, -1)
        >>> cache.end_offset_for(4, 12)   # the latest epoch ends at LEO
        (4, 12)
        >>> cache.end_offset_for(7, 12)   # nothing later than the request: should not happen
        (-1, -1)
        >>> cache.end_offset_for(1, 12)   # nothing at or before the request
        (1, 5)
        >>> cache.end_offset_for(3, 12)   # the epoch before, ending where epoch 4 starts
        (2, 9)
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        later = [entry for entry in self._entries if entry.epoch > requested_epoch]
        if not later:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        earlier = [entry for entry in self._entries if entry.epoch <= requested_epoch]
        if not earlier:
            return requested_epoch, later[0].start_offset
        return earlier[-1].epoch, later[0].start_offset

    def start_offset_after(self, requested_epoch: int, log_end_offset: int) -> int:
        """The KIP-101 answer: LEO for the latest epoch, else the start of the next later epoch.

        Undefined (-1) when the request is older than every cached epoch or newer than all.

        >>> cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 2)])
        >>> cache.start_offset_after(3, 4), cache.start_offset_after(2, 4)
        (4, 2)
        >>> cache.start_offset_after(0, 4), cache.start_offset_after(5, 4)
        (-1, -1)
        """
        if requested_epoch == self.latest_epoch and requested_epoch != UNDEFINED_EPOCH:
            return log_end_offset
        if not self._entries or requested_epoch < self._entries[0].epoch:
            return UNDEFINED_OFFSET
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                return entry.start_offset
        return UNDEFINED_OFFSET


class ReplicaLog:
    """The log of one replica: records in memory, optionally mirrored to a ``LogStorage``.

    ``high_watermark`` and ``log_end_offset`` are exclusive; ``flushed`` is the offset below which
    records survive a hard crash. The checkpointed high watermark is what a restart reads back.
    """

    __slots__ = (
        "_checkpointed_high_watermark",
        "_flushed",
        "_high_watermark",
        "_records",
        "_snapshot",
        "checkpoint_every_change",
        "epoch_cache",
        "log_start_offset",
        "producers",
        "storage",
    )

    def __init__(
        self,
        records: Iterable[LogRecord] = (),
        *,
        high_watermark: int = 0,
        epoch_entries: Iterable[EpochEntry] | None = None,
        storage: LogStorage | None = None,
    ) -> None:
        self._records: list[LogRecord] = []
        # the records as a tuple, built once per change (views read it after every step)
        self._snapshot: tuple[LogRecord, ...] | None = None
        self.log_start_offset = 0
        self.storage = storage
        self.epoch_cache = LeaderEpochCache()
        # producer id -> what the log holds of it (Kafka's ProducerStateManager); empty while
        # no idempotent producer wrote
        self.producers: dict[int, ProducerEntry] = {}
        for record in records:
            self._store(record)
        if epoch_entries is None:
            for record in self._records:
                self.epoch_cache.assign(record.leader_epoch, record.offset)
        else:
            self.epoch_cache = LeaderEpochCache(epoch_entries)
        self._flushed = 0
        self._high_watermark = min(max(high_watermark, 0), self.log_end_offset)
        # the HW a restart reads back; written on every change unless the owner checkpoints
        # periodically (replica.high.watermark.checkpoint.interval.ms)
        self.checkpoint_every_change = True
        self._checkpointed_high_watermark = self._high_watermark
        self._write_checkpoints()

    @classmethod
    def from_records(
        cls, records: Iterable[tuple[int, str]], *, high_watermark: int = 0
    ) -> ReplicaLog:
        """A log whose records are given as (leader_epoch, value), offsets counted from 0.

        >>> render_log(ReplicaLog.from_records([(0, "a"), (2, "b")]))
        '[0:e0 a, 1:e2 b]'
        """
        return cls(
            (LogRecord(offset, epoch, value) for offset, (epoch, value) in enumerate(records)),
            high_watermark=high_watermark,
        )

    @property
    def records(self) -> tuple[LogRecord, ...]:
        if self._snapshot is None:
            self._snapshot = tuple(self._records)
        return self._snapshot

    @property
    def log_end_offset(self) -> int:
        return self.log_start_offset + len(self._records)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def flushed(self) -> int:
        return self._flushed

    @property
    def checkpointed_high_watermark(self) -> int:
        """The HW in the replication-offset-checkpoint file: what a restart reads back."""
        return self._checkpointed_high_watermark

    def checkpoint_high_watermark(self) -> None:
        """Write the HW checkpoint now (Kafka's periodic ``checkpointHighWatermarks``, and on a
        clean shutdown)."""
        self._checkpointed_high_watermark = self._high_watermark
        if self.storage is not None:
            self.storage.write_checkpoints(
                self._checkpointed_high_watermark, self.epoch_cache.entries
            )

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    def record_at(self, offset: int) -> LogRecord | None:
        index = offset - self.log_start_offset
        if 0 <= index < len(self._records):
            return self._records[index]
        return None

    def prefix(self, end_offset: int) -> list[LogRecord]:
        """The records below ``end_offset`` (a list slice: cheap to compare whole)."""
        return self._records[: max(end_offset - self.log_start_offset, 0)]

    def values(self) -> list[str]:
        return [record.value for record in self._records]

    def read_from(self, fetch_offset: int) -> list[LogRecord]:
        """Every record at or after ``fetch_offset``."""
        return self._records[max(fetch_offset - self.log_start_offset, 0) :]

    def append(self, leader_epoch: int, value: str, producer: ProducerFields = NO_PRODUCER) -> int:
        """Append as leader under ``leader_epoch``; returns the offset the record got."""
        offset = self.log_end_offset
        if producer is NO_PRODUCER:
            self.append_record(LogRecord(offset, leader_epoch, value))
        else:
            self.append_record(LogRecord(offset, leader_epoch, value, *producer))
        return offset

    def append_record(self, record: LogRecord) -> None:
        """Append a record that already has its offset (a follower copying its leader)."""
        if record.offset != self.log_end_offset:
            raise ValueError(f"append at {record.offset} but LEO is {self.log_end_offset}")
        self._store(record)
        if record.leader_epoch > self.epoch_cache.latest_epoch and self.epoch_cache.assign(
            record.leader_epoch, record.offset
        ):
            self._write_checkpoints()

    def assign_epoch(self, leader_epoch: int, start_offset: int) -> None:
        """Cache (epoch, start) ahead of any append, as a new leader does (R1.4, KAFKA-7415)."""
        if self.epoch_cache.assign(leader_epoch, start_offset):
            self._write_checkpoints()

    def truncate_to(self, end_offset: int) -> None:
        """Remove every record at or after ``end_offset``; clamp HW and the epoch cache."""
        end_offset = max(end_offset, self.log_start_offset)
        if end_offset >= self.log_end_offset:
            # UnifiedLog.truncateTo truncates the epoch cache even then: a replica that led an
            # epoch without appending holds an entry past its log that no leader knows
            if self.epoch_cache.truncate_from_end(self.log_end_offset):
                self._write_checkpoints()
            return
        del self._records[end_offset - self.log_start_offset :]
        self._snapshot = None
        if self.producers:
            self._rebuild_producers()
        self._flushed = min(self._flushed, end_offset)
        if self.storage is not None:
            self.storage.truncate_to(end_offset)
        self.epoch_cache.truncate_from_end(end_offset)
        self._high_watermark = min(self._high_watermark, end_offset)
        self._write_checkpoints()

    def delete_below(self, start_offset: int) -> bool:
        """Move the log start offset up to ``start_offset`` (never past the HW), deleting the
        records below it: retention or DeleteRecords on a leader, the leader's log start on a
        follower (``UnifiedLog.maybeIncrementLogStartOffset``). True when it moved."""
        start_offset = min(start_offset, self._high_watermark)
        if start_offset <= self.log_start_offset:
            return False
        del self._records[: start_offset - self.log_start_offset]
        self._snapshot = None
        self.log_start_offset = start_offset
        self._flushed = max(self._flushed, start_offset)
        self.epoch_cache.truncate_from_start(start_offset)
        if self.producers:
            self._rebuild_producers()
        if self.storage is not None:
            self.storage.delete_below(start_offset)
        self._write_checkpoints()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and start the log (empty) at ``offset``: a follower whose log
        ends below the leader's log start (``AbstractFetcherThread``, ``truncateFullyAndStartAt``:
        the epoch cache is cleared, HW and log start move to ``offset``)."""
        self._records = []
        self._snapshot = None
        self.log_start_offset = offset
        self._flushed = offset
        self._high_watermark = offset
        self.epoch_cache = LeaderEpochCache()
        self.producers = {}
        if self.storage is not None:
            self.storage.truncate_fully_and_start_at(offset)
        self._write_checkpoints()

    def update_high_watermark(self, high_watermark: int) -> None:
        """Set HW, clamped to [log start, LEO]; it may go down (a follower told so by a leader)."""
        clamped = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        if clamped != self._high_watermark:
            self._high_watermark = clamped
            self._write_checkpoints()

    def flush(self) -> None:
        """Force everything appended so far to survive a hard crash."""
        self._flushed = self.log_end_offset
        if self.storage is not None:
            self.storage.flush()

    def recover_after_crash(self, lose_unflushed: bool, *, torn_tail: bool = False) -> None:
        """What a restarted broker finds: all records, or only the flushed ones when the page
        cache was lost; with ``torn_tail`` the last record, if not flushed, was half written
        and recovery cuts the log there (its CRC fails); the checkpointed HW clamped to the
        recovered LEO; epoch entries that start at or beyond the recovered LEO dropped (as
        Kafka's log recovery does)."""
        torn_tail = torn_tail and self.log_end_offset > self._flushed
        if self.storage is not None:
            if torn_tail:
                records, high_watermark, entries = self.storage.recover(
                    lose_unflushed, torn_tail=True
                )
            else:
                records, high_watermark, entries = self.storage.recover(lose_unflushed)
        else:
            flushed = max(self._flushed - self.log_start_offset, 0)
            records = self._records[:flushed] if lose_unflushed else list(self._records)
            if torn_tail and not lose_unflushed:
                records = records[:-1]
            high_watermark = self._checkpointed_high_watermark
            entries = list(self.epoch_cache.entries)
        self._records = list(records)
        self._snapshot = None
        self._rebuild_producers()
        end = self.log_end_offset
        self.epoch_cache = LeaderEpochCache(entry for entry in entries if entry.start_offset < end)
        self._flushed = end
        self._high_watermark = min(max(high_watermark, self.log_start_offset), end)
        self._checkpointed_high_watermark = self._high_watermark

    def _store(self, record: LogRecord) -> None:
        self._records.append(record)
        self._snapshot = None
        producer_id = record.producer_id
        if producer_id >= 0:
            self._note_producer(record)
        if self.storage is not None:
            if producer_id >= 0:
                fields = ProducerFields(producer_id, record.producer_epoch, record.sequence)
                self.storage.append(
                    record.offset, record.leader_epoch, record.value, producer=fields
                )
            else:
                self.storage.append(record.offset, record.leader_epoch, record.value)

    def _note_producer(self, record: LogRecord) -> None:
        entry = self.producers.get(record.producer_id)
        if entry is None:
            entry = self.producers[record.producer_id] = ProducerEntry(record.producer_epoch)
        entry.add(record.producer_epoch, record.sequence, record.offset)

    def _rebuild_producers(self) -> None:
        """Producer state from the log as it is now, as Kafka reloads it after a truncation
        or a restart (``UnifiedLog.loadProducerState``)."""
        self.producers = {}
        for record in self._records:
            if record.producer_id >= 0:
                self._note_producer(record)

    def _write_checkpoints(self) -> None:
        if self.checkpoint_every_change:
            self._checkpointed_high_watermark = self._high_watermark
        if self.storage is not None:
            self.storage.write_checkpoints(
                self._checkpointed_high_watermark, self.epoch_cache.entries
            )


def render_log(log: ReplicaLog) -> str:
    """The log as ``[offset:epoch value, ...]``, the notation of Kafka's fetcher tests."""
    return "[" + ", ".join(f"{r.offset}:e{r.leader_epoch} {r.value}" for r in log.records) + "]"
