"""A deterministic model of the Java producer's record accumulator and sender.

Per-partition batch queues, ``batch.size``, ``linger.ms``, per-broker drain rates and leader
availability, on a simulated millisecond clock. Partitioners are called the way
``KafkaProducer`` calls them: ``partition``; append; if a new batch is needed and the
partitioner aborts on new batches (any configured ``partitioner.class``), abort,
``onNewBatch``, ``partition`` again and append for good. The built-in partitioner hears the
appended bytes and, at every sender pass, the queue sizes (``RecordAccumulator.partitionReady``).

Sender model: at each pass, a broker that is free and leads partitions with a ready batch
(full, followed by another batch, older than ``linger.ms``, or flushing) takes the first batch
of each of those partitions, up to ``max.request.size``, and is busy for
``latency_ms + bytes / bytes_per_ms + records / records_per_ms`` (one request in flight).

Worked example: linger.ms=0 and one record per millisecond, so every record opens a batch;
the shipped ``RoundRobinPartitioner`` skips every other partition (KAFKA-9965):

>>> from partitioners.registry import create
>>> records = Records.unkeyed(count=6, num_partitions=6, value_bytes=100, interval_ms=1)
>>> run = simulate(records, create("java-roundrobin"), ProducerConfig(linger_ms=0))
>>> run.partitions.tolist(), len(run.batches)
([1, 3, 5, 1, 3, 5], 6)
>>> fixed = simulate(records, create("java-roundrobin-fixed"), ProducerConfig(linger_ms=0))
>>> fixed.partitions.tolist()
[0, 1, 2, 3, 4, 5]

Cost: O(records + sender passes x partitions); no wall clock, no global random.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from partitioners.base import LoadStats, Partitioner, TopicMetadata
from partitioners.errors import InputError
from partitioners.hashing import as_binary_array, key_lengths
from partitioners.limits import (
    MAX_INT32,
    MAX_INT64,
    MAX_PARTITIONS,
    check_bool,
    check_int,
    check_positive_rate,
)

BATCH_HEADER_BYTES = 61  # RecordBatch v2 header
RECORD_OVERHEAD_BYTES = 8  # attributes, varint deltas and lengths of a small record (estimate)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Producer settings the model uses (Java names in the comments)."""

    batch_size: int = 16384  # batch.size
    linger_ms: int = 5  # linger.ms (default 5 since Kafka 4.0, 0 before)
    max_request_size: int = 1_048_576  # max.request.size
    partition_availability_timeout_ms: int = 0  # partitioner.availability.timeout.ms
    adaptive_partitioning: bool = True  # partitioner.adaptive.partitioning.enable
    batch_header_bytes: int = BATCH_HEADER_BYTES
    record_overhead_bytes: int = RECORD_OVERHEAD_BYTES

    def __post_init__(self) -> None:
        owner = "ProducerConfig"
        check_int(owner, "batch_size", self.batch_size, low=1, high=MAX_INT32)
        check_int(owner, "linger_ms", self.linger_ms, low=0, high=MAX_INT32)
        check_int(owner, "max_request_size", self.max_request_size, low=1, high=MAX_INT32)
        check_int(
            owner,
            "partition_availability_timeout_ms",
            self.partition_availability_timeout_ms,
            low=0,
            high=MAX_INT32,
        )
        check_bool(owner, "adaptive_partitioning", self.adaptive_partitioning)
        check_int(owner, "batch_header_bytes", self.batch_header_bytes, low=0, high=MAX_INT32)
        check_int(owner, "record_overhead_bytes", self.record_overhead_bytes, low=0, high=MAX_INT32)


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker: how fast it takes produce requests."""

    broker_id: int
    bytes_per_ms: float = 100_000.0
    records_per_ms: float = math.inf
    latency_ms: int = 1

    def __post_init__(self) -> None:
        check_int("Broker", "broker_id", self.broker_id, low=0, high=MAX_INT32)
        check_positive_rate("Broker", "bytes_per_ms", self.bytes_per_ms, allow_inf=False)
        check_positive_rate("Broker", "records_per_ms", self.records_per_ms, allow_inf=True)
        check_int("Broker", "latency_ms", self.latency_ms, low=0, high=MAX_INT32)


@dataclass(frozen=True, slots=True)
class Outage:
    """The broker leads nothing during ``[start_ms, end_ms)`` (``end_ms`` None: for good)."""

    broker_id: int
    start_ms: int
    end_ms: int | None = None

    def __post_init__(self) -> None:
        check_int("Outage", "broker_id", self.broker_id, low=0, high=MAX_INT32)
        check_int("Outage", "start_ms", self.start_ms, low=0, high=MAX_INT64)
        if self.end_ms is not None:
            check_int("Outage", "end_ms", self.end_ms, low=self.start_ms, high=MAX_INT64)


@dataclass(frozen=True, slots=True)
class ClusterModel:
    """Brokers and leader placement: partition p of every topic is led by broker p mod count."""

    brokers: tuple[Broker, ...] = (Broker(0), Broker(1), Broker(2))
    outages: tuple[Outage, ...] = ()

    def __post_init__(self) -> None:
        if not self.brokers or not all(isinstance(b, Broker) for b in self.brokers):
            raise InputError(
                "must hold at least one Broker", field="ClusterModel.brokers", value=self.brokers
            )
        ids = [broker.broker_id for broker in self.brokers]
        if len(set(ids)) != len(ids):
            raise InputError("broker ids must be distinct", field="ClusterModel.brokers", value=ids)
        for outage in self.outages:
            if not isinstance(outage, Outage) or outage.broker_id not in ids:
                raise InputError(
                    f"must name one of the brokers {ids}",
                    field="ClusterModel.outages",
                    value=outage,
                )

    def leader(self, partition: int) -> int:
        return self.brokers[partition % len(self.brokers)].broker_id

    def broker(self, broker_id: int) -> Broker:
        for broker in self.brokers:
            if broker.broker_id == broker_id:
                return broker
        raise KeyError(broker_id)

    def is_up(self, broker_id: int, now_ms: int) -> bool:
        return not any(
            outage.broker_id == broker_id
            and outage.start_ms <= now_ms
            and (outage.end_ms is None or now_ms < outage.end_ms)
            for outage in self.outages
        )


@dataclass(frozen=True, slots=True)
class Records:
    """Records in send order, column-wise. ``explicit_partitions`` is -1 where the application
    did not choose a partition."""

    topics: tuple[str, ...]
    keys: pa.Array
    value_bytes: np.ndarray
    timestamps_ms: np.ndarray
    num_partitions: np.ndarray
    explicit_partitions: np.ndarray

    def __post_init__(self) -> None:
        count = len(self.topics)
        for field_name in (
            "keys",
            "value_bytes",
            "timestamps_ms",
            "num_partitions",
            "explicit_partitions",
        ):
            length = len(getattr(self, field_name))
            if length != count:
                raise InputError(
                    f"must hold one entry per record ({count}); entries",
                    field=f"Records.{field_name}",
                    value=length,
                )
        counts = self.num_partitions
        for field_name, values, low, high in (
            ("value_bytes", self.value_bytes, 0, MAX_INT32),
            ("timestamps_ms", self.timestamps_ms, 0, MAX_INT64),
            ("num_partitions", counts, 1, MAX_PARTITIONS),
            ("explicit_partitions", self.explicit_partitions, -1, MAX_PARTITIONS - 1),
        ):
            _check_column(field_name, values, low, high)
        beyond = self.explicit_partitions >= counts
        if beyond.any():
            row = int(np.flatnonzero(beyond)[0])
            raise InputError(
                f"must be -1 or below num_partitions ({int(counts[row])}) at record {row}",
                field="Records.explicit_partitions",
                value=int(self.explicit_partitions[row]),
            )

    def __len__(self) -> int:
        return len(self.topics)

    @classmethod
    def build(
        cls,
        topics: Sequence[str],
        keys: Sequence[bytes | None] | pa.Array,
        value_bytes: Sequence[int] | np.ndarray,
        timestamps_ms: Sequence[int] | np.ndarray,
        num_partitions: Sequence[int] | np.ndarray,
        explicit_partitions: Sequence[int] | np.ndarray | None = None,
    ) -> Records:
        count = len(topics)
        explicit = (
            np.full(count, -1, dtype=np.int64)
            if explicit_partitions is None
            else np.asarray(explicit_partitions, dtype=np.int64)
        )
        return cls(
            tuple(topics),
            as_binary_array(keys),
            np.asarray(value_bytes, dtype=np.int64),
            np.asarray(timestamps_ms, dtype=np.int64),
            np.asarray(num_partitions, dtype=np.int64),
            explicit,
        )

    @classmethod
    def unkeyed(
        cls,
        count: int,
        num_partitions: int,
        value_bytes: int,
        interval_ms: float,
        topic: str = "t",
    ) -> Records:
        """``count`` null-key records of equal size, one every ``interval_ms``."""
        timestamps = np.floor(np.arange(count) * interval_ms).astype(np.int64)
        return cls.build(
            [topic] * count,
            pa.nulls(count, pa.binary()),
            np.full(count, value_bytes),
            timestamps,
            np.full(count, num_partitions),
        )


def _check_column(field_name: str, values: np.ndarray, low: int, high: int) -> None:
    if values.dtype.kind not in "iu":
        raise InputError("must be integers", field=f"Records.{field_name}", value=str(values.dtype))
    bad = (values < low) | (values > high)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"must be in [{low}, {high}] (record {row})",
            field=f"Records.{field_name}",
            value=int(values[row]),
        )


@dataclass(frozen=True, slots=True)
class SentBatch:
    """A batch as the sender took it."""

    topic: str
    partition: int
    broker_id: int
    created_ms: int
    sent_ms: int
    done_ms: int
    records: int
    bytes: int
    record_latency_ms_sum: int


@dataclass(frozen=True, slots=True)
class ProducerRun:
    """What happened: the partition of every record (input order) and every batch sent.
    ``unsent_batches`` were still queued when the run ended (a leader never came back)."""

    partitions: np.ndarray
    record_bytes: np.ndarray
    batches: tuple[SentBatch, ...]
    unsent_batches: int
    batch_size: int

    def bytes_per_broker(self) -> dict[int, int]:
        totals: dict[int, int] = {}
        for batch in self.batches:
            totals[batch.broker_id] = totals.get(batch.broker_id, 0) + batch.bytes
        return dict(sorted(totals.items()))

    def mean_batch_fill(self) -> float:
        if not self.batches:
            return 0.0
        return float(np.mean([min(b.bytes / self.batch_size, 1.0) for b in self.batches]))

    def mean_record_latency_ms(self) -> float:
        records = sum(b.records for b in self.batches)
        if not records:
            return 0.0
        return sum(b.record_latency_ms_sum for b in self.batches) / records


@dataclass(slots=True)
class _Batch:
    topic: str
    partition: int
    created_ms: int
    capacity: int
    bytes: int = 0
    records: int = 0
    timestamp_sum: int = 0
    closed: bool = False

    def is_full(self) -> bool:
        return self.closed or (self.records > 0 and self.bytes >= self.capacity)


@dataclass(slots=True)
class _NodeStats:
    ready_ms: int
    drain_ms: int


@dataclass(slots=True)
class _State:
    config: ProducerConfig
    cluster: ClusterModel
    partitioner: Partitioner
    queues: dict[tuple[str, int], deque[_Batch]] = field(default_factory=dict)
    topic_partitions: dict[str, int] = field(default_factory=dict)
    busy_until: dict[int, int] = field(default_factory=dict)
    node_stats: dict[int, _NodeStats] = field(default_factory=dict)
    drain_start: dict[int, int] = field(default_factory=dict)
    sent: list[SentBatch] = field(default_factory=list)
    wakeups: list[int] = field(default_factory=list)
    flushing: bool = False
    leaders: list[int] = field(default_factory=list)
    down_cache: tuple[int, frozenset[int]] = (-1, frozenset())
    metadata_cache: dict[tuple[int, frozenset[int]], TopicMetadata] = field(default_factory=dict)

    def wake_at(self, when_ms: int) -> None:
        heapq.heappush(self.wakeups, when_ms)

    def leader(self, partition: int) -> int:
        while len(self.leaders) <= partition:
            self.leaders.append(self.cluster.leader(len(self.leaders)))
        return self.leaders[partition]

    def down_brokers(self, now_ms: int) -> frozenset[int]:
        if not self.cluster.outages:
            return frozenset()
        if self.down_cache[0] != now_ms:
            down = frozenset(
                broker.broker_id
                for broker in self.cluster.brokers
                if not self.cluster.is_up(broker.broker_id, now_ms)
            )
            self.down_cache = (now_ms, down)
        return self.down_cache[1]

    def metadata(self, num_partitions: int, now_ms: int) -> TopicMetadata:
        down = self.down_brokers(now_ms)
        cached = self.metadata_cache.get((num_partitions, down))
        if cached is None:
            available = tuple(p for p in range(num_partitions) if self.leader(p) not in down)
            cached = TopicMetadata(num_partitions, available)
            self.metadata_cache[(num_partitions, down)] = cached
        return cached


def simulate(
    records: Records,
    partitioner: Partitioner,
    config: ProducerConfig | None = None,
    cluster: ClusterModel | None = None,
) -> ProducerRun:
    """Send ``records`` through the model with ``partitioner``; pure and deterministic given
    the partitioner's seeded random source."""
    config = config or ProducerConfig()
    cluster = cluster or ClusterModel()
    state = _State(config, cluster, partitioner)
    for outage in cluster.outages:
        state.wake_at(outage.start_ms)
        if outage.end_ms is not None:
            state.wake_at(outage.end_ms)
    count = len(records)
    keyed = partitioner.keyed_partitions(records.keys, records.num_partitions) if count else None
    record_bytes = key_lengths(records.keys) + records.value_bytes + config.record_overhead_bytes
    # the loop reads Python lists: indexing numpy arrays per record costs a scalar box each time
    keys = records.keys.to_pylist()
    timestamps = records.timestamps_ms.tolist()
    counts = records.num_partitions.tolist()
    explicit = records.explicit_partitions.tolist()
    hashed = keyed.tolist() if keyed is not None else [-1] * count
    sizes = record_bytes.tolist()
    partitions = np.empty(count, dtype=np.int32)
    order = np.argsort(records.timestamps_ms, kind="stable").tolist()
    last_pass_ms: int | None = None
    for index in order:
        now_ms = timestamps[index]
        if last_pass_ms != now_ms:
            _run_passes_until(state, now_ms)
            _sender_pass(state, now_ms)
            last_pass_ms = now_ms
        partitions[index] = _append(
            state,
            now_ms,
            records.topics[index],
            keys[index],
            counts[index],
            explicit[index],
            hashed[index],
            sizes[index],
        )
    state.flushing = True
    end_ms = int(records.timestamps_ms.max()) if count else 0
    state.wake_at(end_ms + 1)
    _run_passes_until(state, None)
    unsent = sum(len(queue) for queue in state.queues.values())
    return ProducerRun(partitions, record_bytes, tuple(state.sent), unsent, config.batch_size)


def _run_passes_until(state: _State, before_ms: int | None) -> None:
    """Sender passes at every pending wake-up earlier than ``before_ms`` (all if None)."""
    last = None
    while state.wakeups and (before_ms is None or state.wakeups[0] < before_ms):
        when = heapq.heappop(state.wakeups)
        if when == last:
            continue
        last = when
        _sender_pass(state, when)
        if before_ms is None and not any(state.queues.values()):
            state.wakeups.clear()


def _append(
    state: _State,
    now_ms: int,
    topic: str,
    key: bytes | None,
    num_partitions: int,
    explicit_partition: int,
    keyed_partition: int,
    size: int,
) -> int:
    config = state.config
    partitioner = state.partitioner
    state.topic_partitions[topic] = num_partitions
    metadata = state.metadata(num_partitions, now_ms)
    from_strategy = explicit_partition < 0 and keyed_partition < 0

    def choose() -> int:
        if explicit_partition >= 0:
            return explicit_partition
        if keyed_partition >= 0:
            return keyed_partition
        return partitioner.unkeyed.choose(topic, key, metadata, now_ms)

    partition = choose()
    queue = state.queues.setdefault((topic, partition), deque())
    appended = _try_append(queue, size, now_ms)
    if appended is None and partitioner.aborts_on_new_batch:
        partitioner.on_new_batch(topic, metadata, partition)
        partition = choose()
        queue = state.queues.setdefault((topic, partition), deque())
        appended = _try_append(queue, size, now_ms)
    if appended is None:
        capacity = max(config.batch_size, config.batch_header_bytes + size)
        batch = _Batch(topic, partition, now_ms, capacity)
        batch.bytes = config.batch_header_bytes + size
        batch.records = 1
        batch.timestamp_sum = now_ms
        queue.append(batch)
        appended = batch.bytes
        state.wake_at(now_ms + config.linger_ms)
    if queue[-1].is_full():
        state.wake_at(now_ms + 1)
    if from_strategy:
        last_batch_full = not queue or queue[-1].is_full()
        partitioner.unkeyed.on_append(topic, partition, appended, last_batch_full, metadata)
    return partition


def _try_append(queue: deque[_Batch], size: int, now_ms: int) -> int | None:
    """Append to the open last batch if the record fits; close it if it does not."""
    if not queue:
        return None
    last = queue[-1]
    if last.closed:
        return None
    if last.bytes + size > last.capacity:
        last.closed = True
        return None
    last.bytes += size
    last.records += 1
    last.timestamp_sum += now_ms
    return size


def _sender_pass(state: _State, now_ms: int) -> None:
    config = state.config
    down = state.down_brokers(now_ms)
    ready_by_broker: dict[int, list[tuple[str, int]]] = {}
    for (topic, partition), queue in state.queues.items():
        if not queue:
            continue
        first = queue[0]
        ready = (
            state.flushing
            or len(queue) > 1
            or first.is_full()
            or now_ms - first.created_ms >= config.linger_ms
        )
        if not ready:
            state.wake_at(first.created_ms + config.linger_ms)
            continue
        broker_id = state.leader(partition)
        if broker_id not in down:
            ready_by_broker.setdefault(broker_id, []).append((topic, partition))
    if state.partitioner.unkeyed.wants_load_stats:
        for topic, num_partitions in state.topic_partitions.items():
            state.partitioner.unkeyed.on_load_stats(
                topic, _load_stats(state, topic, num_partitions, now_ms)
            )
    for broker_id in sorted(ready_by_broker):
        stats = state.node_stats.setdefault(broker_id, _NodeStats(now_ms, now_ms))
        stats.ready_ms = now_ms
        if state.busy_until.get(broker_id, -1) > now_ms:
            continue
        stats.drain_ms = now_ms
        _drain(state, broker_id, sorted(ready_by_broker[broker_id]), now_ms)


def _drain(state: _State, broker_id: int, ready: list[tuple[str, int]], now_ms: int) -> None:
    broker = state.cluster.broker(broker_id)
    start = state.drain_start.get(broker_id, 0) % len(ready)
    state.drain_start[broker_id] = start + 1
    taken: list[_Batch] = []
    request_bytes = 0
    for offset in range(len(ready)):
        topic, partition = ready[(start + offset) % len(ready)]
        queue = state.queues[(topic, partition)]
        if taken and request_bytes + queue[0].bytes > state.config.max_request_size:
            break
        batch = queue.popleft()
        batch.closed = True
        taken.append(batch)
        request_bytes += batch.bytes
    request_records = sum(batch.records for batch in taken)
    service_ms = broker.latency_ms + request_bytes / broker.bytes_per_ms
    if math.isfinite(broker.records_per_ms):
        service_ms += request_records / broker.records_per_ms
    done_ms = now_ms + max(1, math.ceil(service_ms))
    state.busy_until[broker_id] = done_ms
    state.wake_at(done_ms)
    for batch in taken:
        state.sent.append(
            SentBatch(
                batch.topic,
                batch.partition,
                broker_id,
                batch.created_ms,
                now_ms,
                done_ms,
                batch.records,
                batch.bytes,
                batch.records * done_ms - batch.timestamp_sum,
            )
        )


def _load_stats(state: _State, topic: str, num_partitions: int, now_ms: int) -> LoadStats | None:
    """Queue sizes as ``partitionReady`` collects them, or None (uniform choice)."""
    config = state.config
    if not config.adaptive_partitioning or num_partitions < 2:
        return None
    # statistics exist only once every partition of the topic has a queue
    if any((topic, p) not in state.queues for p in range(num_partitions)):
        return None
    down = state.down_brokers(now_ms)
    timeout = config.partition_availability_timeout_ms
    lagging = (
        {
            broker_id
            for broker_id, stats in state.node_stats.items()
            if stats.ready_ms - stats.drain_ms > timeout
        }
        if timeout > 0
        else set()
    )
    queues = state.queues
    ids: list[int] = []
    sizes: list[int] = []
    for partition in range(num_partitions):
        broker_id = state.leader(partition)
        queued = len(queues[(topic, partition)])
        # no leader: left out; a lagging leader only drops partitions with queued batches
        if broker_id in down or (queued and broker_id in lagging):
            continue
        ids.append(partition)
        sizes.append(queued)
    if not sizes:
        return None
    return LoadStats(tuple(sizes), tuple(ids), excluded_any=len(ids) < num_partitions)
