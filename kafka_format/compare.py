"""Line up the replicas of one partition (one partition directory per broker) and find where
they diverge: the check an operator runs after an unclean leader election.

Followers copy the leader's batches byte for byte (offsets and partition leader epoch
included), so replicas that agree hold the same batches. For each pair, from the larger of the
two first offsets (retention may have deleted more on one), batches are compared in log order
by base and last offset, leader epoch, magic, stored CRC, size and CRC validity; the first
difference is the *divergence* (its offset is the smaller base offset of the two batches
there). Without a difference, the replica with fewer batches is a *prefix* of the other (a
follower behind), or the two are identical. Each pair also gets the offset Kafka's
leader-epoch truncation (KIP-101/KIP-279) would truncate a follower to, either way round, from
the two leader-epoch caches.

>>> import tempfile
>>> from kafka_format.batch import build_batch
>>> from kafka_format.model import NewRecord
>>> def batch(offset, epoch, value):
...     return build_batch([NewRecord(None, value, timestamp=offset)], base_offset=offset,
...                        partition_leader_epoch=epoch)
>>> with tempfile.TemporaryDirectory() as root:
...     for broker, tail in (("1", [batch(2, 1, b"c")]), ("2", [batch(2, 2, b"C")])):
...         path = Path(root, broker, "orders-0")
...         path.mkdir(parents=True)
...         log = b"".join([batch(0, 0, b"a"), batch(1, 0, b"b"), *tail])
...         _ = (path / "00000000000000000000.log").write_bytes(log)
...     result = compare_replicas([Path(root, "1", "orders-0"), Path(root, "2", "orders-0")])
>>> pair = result.pairs[0]
>>> pair.relation, pair.divergence.offset, pair.divergence.reason, pair.divergence.epochs
('diverged', 2, 'leader_epoch', (1, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kafka_format.checkpoint import EpochEntry
from kafka_format.errors import KafkaFormatError
from kafka_format.inspect import (
    BASE,
    CRC,
    EPOCH,
    LAST,
    MAGIC,
    SIZE,
    VALID,
    PartitionReport,
    epochs_json,
    inspect_partition,
)
from kafka_format.partition_dir import looks_like_partition_dir

__all__ = [
    "Comparison",
    "Divergence",
    "PairComparison",
    "compare_replicas",
    "end_offset_for_epoch",
]

UNDEFINED = -1
_KEY_COLUMNS = [BASE, LAST, EPOCH, MAGIC, CRC, SIZE, VALID]


def end_offset_for_epoch(
    cache: Sequence[EpochEntry], log_end_offset: int, requested_epoch: int
) -> tuple[int, int]:
    """``LeaderEpochFileCache.endOffsetFor``: (the largest epoch <= requested, the offset where
    the requested epoch ends), ``(-1, -1)`` when unknown.

    >>> cache = [EpochEntry(0, 0), EpochEntry(2, 10)]
    >>> end_offset_for_epoch(cache, 15, 2), end_offset_for_epoch(cache, 15, 1)
    ((2, 15), (0, 10))
    """
    if requested_epoch == UNDEFINED or not cache:
        return UNDEFINED, UNDEFINED
    if cache[-1].epoch == requested_epoch:
        return requested_epoch, log_end_offset
    higher = [entry for entry in cache if entry.epoch > requested_epoch]
    if not higher:
        return UNDEFINED, UNDEFINED
    floor = [entry for entry in cache if entry.epoch <= requested_epoch]
    return (floor[-1].epoch if floor else requested_epoch), higher[0].start_offset


def truncation_offset(leader: PartitionReport, follower: PartitionReport) -> int | None:
    """Where ``follower`` truncates when it fetches from ``leader`` (one round of KIP-279's
    OffsetsForLeaderEpoch exchange): the leader's end offset for the follower's latest epoch,
    capped by the follower's own end offset for the epoch the leader answered. None when a
    cache is missing or the leader does not know the epoch (Kafka then falls back to the high
    watermark)."""
    if not leader.leader_epoch_cache or not follower.leader_epoch_cache:
        return None
    leader_end = leader.log_end_offset or 0
    follower_end = follower.log_end_offset or 0
    follower_epoch = follower.leader_epoch_cache[-1].epoch
    epoch, end = end_offset_for_epoch(leader.leader_epoch_cache, leader_end, follower_epoch)
    if epoch == UNDEFINED:
        return None
    if epoch == follower_epoch:
        return min(end, follower_end)
    own_epoch, own_end = end_offset_for_epoch(follower.leader_epoch_cache, follower_end, epoch)
    if own_epoch == UNDEFINED:
        return None
    return min(end, own_end)


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first difference of two replicas: ``offset``, ``reason`` (``offsets``: the batches
    cover different offsets; ``leader_epoch``; ``crc_failure``: one fails its CRC;
    ``content``), each replica's batch there ``(base offset, last offset, leader epoch, crc)``
    (None past its end) and batch leader ``epochs``, and the epochs the caches give there."""

    offset: int
    reason: str
    batches: tuple[tuple[int, int, int, int] | None, tuple[int, int, int, int] | None]
    epochs: tuple[int | None, int | None]
    cache_epochs: tuple[int | None, int | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "reason": self.reason,
            "epochs": list(self.epochs),
            "cache_epochs": list(self.cache_epochs),
            "batches": [
                None
                if batch is None
                else dict(
                    zip(("base_offset", "last_offset", "leader_epoch", "crc"), batch, strict=True)
                )
                for batch in self.batches
            ],
        }


@dataclass(frozen=True, slots=True)
class PairComparison:
    """Replicas ``first`` and ``second`` (indexes): ``relation`` is ``identical``, ``prefix``
    (``shorter`` is a prefix of the other) or ``diverged``; ``compared_from`` the first offset
    both hold, ``agreed_until`` the offset up to which (exclusive) they hold the same batches;
    ``truncation``: where each would truncate to following the other (first follows second,
    second follows first)."""

    first: int
    second: int
    relation: str
    shorter: int | None
    compared_from: int | None
    agreed_until: int | None
    divergence: Divergence | None
    truncation: tuple[int | None, int | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "replicas": [self.first, self.second],
            "relation": self.relation,
            "shorter": self.shorter,
            "compared_from": self.compared_from,
            "agreed_until": self.agreed_until,
            "divergence": self.divergence.to_json() if self.divergence else None,
            "truncation": {
                "first_following_second": self.truncation[0],
                "second_following_first": self.truncation[1],
            },
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """All replicas and every pair of them."""

    replicas: tuple[PartitionReport, ...]
    pairs: tuple[PairComparison, ...]

    @property
    def diverged(self) -> bool:
        return any(pair.relation == "diverged" for pair in self.pairs)

    @property
    def first_divergence(self) -> int | None:
        offsets = [pair.divergence.offset for pair in self.pairs if pair.divergence]
        return min(offsets) if offsets else None

    def verdict(self) -> str:
        count = len(self.replicas)
        if self.diverged:
            pairs = sum(1 for pair in self.pairs if pair.relation == "diverged")
            return (
                f"DIVERGED: {pairs} of {len(self.pairs)} replica pairs differ; first divergence "
                f"at offset {self.first_divergence}"
            )
        return f"AGREE: {count} replicas, each a prefix of the longest (no divergence)"

    def to_json(self) -> dict[str, Any]:
        return {
            "replicas": [
                {
                    "index": number,
                    "path": replica.path,
                    "first_offset": _first_offset(replica),
                    "log_end_offset": replica.log_end_offset,
                    "high_watermark": replica.high_watermark,
                    "leader_epoch_cache": epochs_json(replica.leader_epoch_cache),
                    "epochs_in_log": epochs_json(replica.epochs_in_log),
                    "problems": [finding.to_json() for finding in replica.problems],
                }
                for number, replica in enumerate(self.replicas)
            ],
            "pairs": [pair.to_json() for pair in self.pairs],
            "verdict": {
                "diverged": self.diverged,
                "first_divergence": self.first_divergence,
                "text": self.verdict(),
            },
        }


def _first_offset(replica: PartitionReport) -> int | None:
    return int(replica.batches[0, BASE]) if len(replica.batches) else None


def _batch(rows: np.ndarray, index: int) -> tuple[int, int, int, int] | None:
    if index >= len(rows):
        return None
    row = rows[index]
    return int(row[BASE]), int(row[LAST]), int(row[EPOCH]), int(row[CRC])


def _compare_pair(
    first: int, second: int, a: PartitionReport, b: PartitionReport
) -> PairComparison:
    truncation = (truncation_offset(b, a), truncation_offset(a, b))
    rows_a, rows_b = a.batches, b.batches
    compared_from = None
    if len(rows_a) and len(rows_b):
        compared_from = int(max(rows_a[0, BASE], rows_b[0, BASE]))
        rows_a = rows_a[rows_a[:, BASE] >= compared_from]
        rows_b = rows_b[rows_b[:, BASE] >= compared_from]
    common = min(len(rows_a), len(rows_b))
    keys_a, keys_b = rows_a[:common][:, _KEY_COLUMNS], rows_b[:common][:, _KEY_COLUMNS]
    differs = np.flatnonzero((keys_a != keys_b).any(axis=1))
    if len(differs):
        k = int(differs[0])
        row_a, row_b = rows_a[k], rows_b[k]
        offset = int(min(row_a[BASE], row_b[BASE]))
        if row_a[BASE] != row_b[BASE] or row_a[LAST] != row_b[LAST]:
            reason = "offsets"
        elif row_a[EPOCH] != row_b[EPOCH]:
            reason = "leader_epoch"
        elif not (row_a[VALID] and row_b[VALID]):
            reason = "crc_failure"
        else:
            reason = "content"
        divergence = Divergence(
            offset,
            reason,
            (_batch(rows_a, k), _batch(rows_b, k)),
            (int(row_a[EPOCH]), int(row_b[EPOCH])),
            (a.epoch_at(offset), b.epoch_at(offset)),
        )
        return PairComparison(
            first, second, "diverged", None, compared_from, offset, divergence, truncation
        )
    agreed_until = int(rows_a[common - 1, LAST]) + 1 if common else compared_from
    if len(rows_a) == len(rows_b):
        relation, shorter = "identical", None
    else:
        relation, shorter = "prefix", first if len(rows_a) < len(rows_b) else second
    return PairComparison(
        first, second, relation, shorter, compared_from, agreed_until, None, truncation
    )


def compare_replicas(paths: Sequence[Path]) -> Comparison:
    """Inspect each partition directory and compare every pair. Raises
    :class:`KafkaFormatError` when fewer than two are given or one is not a partition
    directory."""
    if len(paths) < 2:
        raise KafkaFormatError("give at least two partition directories", field="DIR")
    reports = []
    for path in paths:
        if not path.exists():
            raise KafkaFormatError("no such directory", source=str(path))
        if not path.is_dir():
            raise KafkaFormatError("not a directory", source=str(path))
        try:
            is_partition = looks_like_partition_dir(path)
        except OSError as error:
            raise KafkaFormatError(f"cannot list: {error.strerror}", source=str(path)) from None
        if not is_partition:
            raise KafkaFormatError(
                "not a partition directory (no segment files, leader-epoch-checkpoint or "
                "partition.metadata)",
                source=str(path),
            )
        reports.append(inspect_partition(path))
    pairs = tuple(
        _compare_pair(i, j, reports[i], reports[j])
        for i in range(len(reports))
        for j in range(i + 1, len(reports))
    )
    return Comparison(tuple(reports), pairs)
