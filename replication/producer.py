"""Kafka's producer as the simulator runs it: a record accumulator with one batch per record,
retries with backoff, ``delivery.timeout.ms``, ``max.in.flight.requests.per.connection`` and the
idempotent producer (a producer id and epoch, a sequence number per batch), with the client-side
rules of Kafka's ``Sender``, ``RecordAccumulator`` and ``TransactionManager``.

The cluster (``replication.sim``) owns the network and the brokers; a ``ProducerClient`` only
decides what to send next, and what an answer (or a timeout) means for a batch.

Two batches in flight, the first one's request lost: without idempotence the first one's
retry lands after the second (reordering); the broker side is in ``sim`` (see its tests).

>>> client = ProducerClient("p1", ProducerSettings(max_in_flight=2), producer_id=-1)
>>> client.send("m1", now_ms=0); client.send("m2", now_ms=0)
>>> first = client.next_to_send(0); client.dispatched(first, 0)
>>> second = client.next_to_send(0); client.dispatched(second, 0)
>>> first.value, second.value, client.next_to_send(0)
('m1', 'm2', None)
>>> client.answer(second, "ok", 5)
'ok'
>>> client.answer(first, "REQUEST_TIMED_OUT", 30000)  # retried after its backoff
'retry'
>>> client.next_to_send(30099) is None, client.next_to_send(30100).value
(True, 'm1')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.errors import ScenarioError
from replication.log import NO_PRODUCER, ProducerFields

# the errors a producer retries (Kafka's RetriableException subclasses among the answers here)
RETRIABLE = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
    }
)
OUT_OF_ORDER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
# a batch that ran out of time in the accumulator or between attempts
DELIVERY_TIMEOUT = "DELIVERY_TIMEOUT"
MAX_INT = 2**31 - 1
MAX_TIME_MS = 10**12
# Kafka's MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
# the first producer id the simulated cluster hands out (InitProducerId)
FIRST_PRODUCER_ID = 1000

# field name in the scenario file -> (attribute, Kafka's property)
SETTING_FIELDS: dict[str, str] = {
    "acks": "acks",
    "idempotence": "enable.idempotence",
    "max_in_flight": "max.in.flight.requests.per.connection",
    "retries": "retries",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "request_timeout_ms": "request.timeout.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "retry_backoff_max_ms": "retry.backoff.max.ms",
}


def _integer(value: object, name: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ScenarioError(
            f"{SETTING_FIELDS[name]} must be an integer from {minimum:,} to {maximum:,}",
            field=name,
            value=value,
        )
    return value


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """One producer's configuration, checked as Kafka's ``ProducerConfig`` checks it.

    Defaults are Kafka's for a producer that does not enable idempotence (``acks=all``,
    ``retries`` MAX_INT, ``delivery.timeout.ms`` 120 s, ``request.timeout.ms`` 30 s,
    ``retry.backoff.ms`` 100, ``retry.backoff.max.ms`` 1000, 5 requests in flight).

    >>> ProducerSettings(idempotence=True, acks=1)
    Traceback (most recent call last):
    ...
    replication.errors.ScenarioError: acks: the idempotent producer needs acks=all (got 1)
    >>> ProducerSettings(max_in_flight=0)
    Traceback (most recent call last):
    ...
    replication.errors.ScenarioError: max_in_flight: max.in.flight.requests.per.connection \
must be an integer from 1 to 2,147,483,647 (got 0)
    """

    acks: str | int = "all"
    idempotence: bool = False
    max_in_flight: int = 5
    retries: int = MAX_INT
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000

    def __post_init__(self) -> None:
        acks = self.acks
        if isinstance(acks, bool) or acks not in ("all", -1, "-1", 0, 1, "0", "1"):
            raise ScenarioError('acks must be 0, 1, -1 or "all"', field="acks", value=acks)
        object.__setattr__(self, "acks", "all" if acks in ("all", -1, "-1") else int(acks))
        if not isinstance(self.idempotence, bool):
            raise ScenarioError(
                "must be true or false", field="idempotence", value=self.idempotence
            )
        _integer(self.max_in_flight, "max_in_flight", 1, MAX_INT)
        _integer(self.retries, "retries", 0, MAX_INT)
        _integer(self.request_timeout_ms, "request_timeout_ms", 1, MAX_TIME_MS)
        _integer(self.delivery_timeout_ms, "delivery_timeout_ms", 1, MAX_TIME_MS)
        _integer(self.retry_backoff_ms, "retry_backoff_ms", 1, MAX_TIME_MS)
        _integer(self.retry_backoff_max_ms, "retry_backoff_max_ms", 1, MAX_TIME_MS)
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ScenarioError(
                "retry.backoff.max.ms must be at least retry.backoff.ms",
                field="retry_backoff_max_ms",
                value=self.retry_backoff_max_ms,
            )
        # ProducerConfig / KafkaProducer.configureDeliveryTimeout (linger.ms is 0 here)
        if self.delivery_timeout_ms < self.request_timeout_ms:
            raise ScenarioError(
                "delivery.timeout.ms must be at least request.timeout.ms "
                f"({self.request_timeout_ms:,})",
                field="delivery_timeout_ms",
                value=self.delivery_timeout_ms,
            )
        if self.idempotence:
            # ProducerConfig.postProcessAndValidateIdempotenceConfigs
            if self.acks != "all":
                raise ScenarioError(
                    "the idempotent producer needs acks=all", field="acks", value=self.acks
                )
            if self.retries == 0:
                raise ScenarioError(
                    "the idempotent producer needs retries above 0", field="retries", value=0
                )
            if self.max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
                raise ScenarioError(
                    "the idempotent producer allows at most "
                    f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} requests in flight",
                    field="max_in_flight",
                    value=self.max_in_flight,
                )

    def backoff_ms(self, attempts: int) -> int:
        """The wait before attempt ``attempts + 1`` (KIP-580's exponential backoff, without
        its random jitter so that runs stay deterministic).

        >>> [ProducerSettings().backoff_ms(n) for n in (1, 2, 4, 5, 9)]
        [100, 200, 800, 1000, 1000]
        """
        if attempts > 20:
            return self.retry_backoff_max_ms
        return min(self.retry_backoff_ms * 2 ** max(attempts - 1, 0), self.retry_backoff_max_ms)

    def to_options(self) -> dict[str, str | int | bool]:
        """The settings as ``producer`` step options (defaults left out)."""
        options: dict[str, str | int | bool] = {}
        default = ProducerSettings()
        for name in SETTING_FIELDS:
            value = getattr(self, name)
            if value != getattr(default, name):
                options[name] = value
        return options


@dataclass(slots=True)
class Batch:
    """One record waiting in the accumulator or in flight."""

    value: str
    created_ms: int
    # the idempotent producer's sequence number (-1 without idempotence)
    sequence: int = -1
    attempts: int = 0
    # not sent again before this time (retry backoff)
    retry_at_ms: int = 0


@dataclass(slots=True)
class InFlight:
    batch: Batch
    # the client gives up waiting for an answer then (request.timeout.ms)
    deadline_ms: int


@dataclass(slots=True)
class ProducerClient:
    """The client side of one producer: what waits, what is in flight, what each send ended as.

    ``send`` queues a record; the cluster asks ``next_to_send`` for the batch to put on the
    wire (``dispatched``) and reports each answer or timeout with ``answer``, which returns
    ``ok``, ``retry`` or the error the send failed with.
    """

    name: str
    settings: ProducerSettings
    # the id InitProducerId handed out (-1 without idempotence)
    producer_id: int
    producer_epoch: int = 0
    queue: list[Batch] = field(default_factory=list)
    in_flight: list[InFlight] = field(default_factory=list)
    next_sequence: int = 0
    last_acked_sequence: int = -1
    # value -> pending | ok | sent | the error, in the order sent
    results: dict[str, str] = field(default_factory=dict)
    # values in the order the application sent them
    sent_order: list[str] = field(default_factory=list)

    def send(self, value: str, now_ms: int) -> None:
        """``KafkaProducer.send``: the record joins the accumulator."""
        self.queue.append(Batch(value, now_ms))
        self.sent_order.append(value)
        self.results[value] = "pending"

    def fields(self, batch: Batch) -> ProducerFields:
        if self.producer_id < 0:
            return NO_PRODUCER
        return ProducerFields(self.producer_id, self.producer_epoch, batch.sequence)

    def next_to_send(self, now_ms: int) -> Batch | None:
        """The batch the sender drains now, if any.

        At most ``max_in_flight`` requests are out. A batch in retry backoff holds back the
        batches behind it (``RecordAccumulator.ready``). With idempotence, a retried batch (it
        has a sequence already) goes only when it is the lowest sequence not yet answered
        (``shouldStopDrainBatchesForPartition``), which brings the requests in flight down to 1.
        """
        if not self.queue or len(self.in_flight) >= self.settings.max_in_flight:
            return None
        first = self.queue[0]
        if first.retry_at_ms > now_ms:
            return None
        if self.producer_id >= 0 and first.sequence >= 0:
            lowest = min((flight.batch.sequence for flight in self.in_flight), default=None)
            if lowest is not None and lowest < first.sequence:
                return None
        return first

    def dispatched(self, batch: Batch, now_ms: int) -> None:
        """``batch`` is on the wire: out of the queue, sequence assigned on its first drain."""
        self.queue.remove(batch)
        if self.producer_id >= 0 and batch.sequence < 0:
            batch.sequence = self.next_sequence
            self.next_sequence += 1
        batch.attempts += 1
        if self.settings.acks == 0:
            # acks=0: no answer comes; the send counts as done
            self.results[batch.value] = "sent"
            return
        self.in_flight.append(InFlight(batch, now_ms + self.settings.request_timeout_ms))

    def timed_out(self, now_ms: int) -> list[Batch]:
        """In-flight batches whose request timeout passed with no answer."""
        return [flight.batch for flight in self.in_flight if flight.deadline_ms <= now_ms]

    def answer(self, batch: Batch, error: str, now_ms: int) -> str:
        """An answer (``ok``, ``DUPLICATE`` or an error code) or a timeout for ``batch``."""
        self.in_flight = [flight for flight in self.in_flight if flight.batch is not batch]
        if error in ("ok", "DUPLICATE"):
            self.results[batch.value] = "ok"
            if batch.sequence > self.last_acked_sequence:
                self.last_acked_sequence = batch.sequence
            return "ok"
        if self._can_retry(batch, error, now_ms):
            batch.retry_at_ms = now_ms + self.settings.backoff_ms(batch.attempts)
            self._reenqueue(batch)
            return "retry"
        if now_ms >= batch.created_ms + self.settings.delivery_timeout_ms:
            error = DELIVERY_TIMEOUT
        self.results[batch.value] = error
        return error

    def _can_retry(self, batch: Batch, error: str, now_ms: int) -> bool:
        """``Sender.canRetry``: attempts left, delivery timeout not passed, a retriable error.
        With idempotence an OutOfOrderSequence is retried only while an earlier batch is
        unanswered (``TransactionManager.canRetry``: the batch is not the next sequence after
        the last one acknowledged); after that it means the broker lost acknowledged data."""
        settings = self.settings
        if batch.attempts > settings.retries:
            return False
        if now_ms >= batch.created_ms + settings.delivery_timeout_ms:
            return False
        if error == OUT_OF_ORDER and self.producer_id >= 0:
            return batch.sequence != self.last_acked_sequence + 1
        return error in RETRIABLE

    def _reenqueue(self, batch: Batch) -> None:
        """``RecordAccumulator.reenqueue``: back at the front of the queue; with idempotence
        in sequence order among the batches that have one (``insertInSequenceOrder``)."""
        if self.producer_id < 0:
            self.queue.insert(0, batch)
            return
        position = 0
        while position < len(self.queue) and 0 <= self.queue[position].sequence < batch.sequence:
            position += 1
        self.queue.insert(position, batch)

    def expire(self, now_ms: int) -> list[Batch]:
        """Batches past ``delivery.timeout.ms`` fail, queued ones
        (``RecordAccumulator.expiredBatches``) and in-flight ones
        (``Sender.getExpiredInflightBatches``); an answer arriving later is ignored."""
        limit = self.settings.delivery_timeout_ms
        expired = [batch for batch in self.queue if now_ms >= batch.created_ms + limit]
        for batch in expired:
            self.queue.remove(batch)
            self.results[batch.value] = DELIVERY_TIMEOUT
        late = [f.batch for f in self.in_flight if now_ms >= f.batch.created_ms + limit]
        if late:
            self.in_flight = [f for f in self.in_flight if f.batch not in late]
            for batch in late:
                self.results[batch.value] = DELIVERY_TIMEOUT
        return expired + late

    def next_event_ms(self, now_ms: int) -> int | None:
        """The next time something happens on the client alone: a backoff ends, a request or a
        queued batch times out."""
        limit = self.settings.delivery_timeout_ms
        times = [flight.deadline_ms for flight in self.in_flight if flight.deadline_ms > now_ms]
        times += [
            flight.batch.created_ms + limit
            for flight in self.in_flight
            if flight.batch.created_ms + limit > now_ms
        ]
        for batch in self.queue:
            if batch.retry_at_ms > now_ms:
                times.append(batch.retry_at_ms)
            if batch.created_ms + limit > now_ms:
                times.append(batch.created_ms + limit)
        return min(times) if times else None

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.in_flight)
