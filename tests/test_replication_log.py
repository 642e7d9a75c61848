"""Replica log, leader-epoch cache (R4.1-R4.2), the storage seam, and the golden fetcher vectors
of Kafka's AbstractFetcherThreadTest (R4.4), round by round."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from replication.log import EpochEntry, LeaderEpochCache, LogRecord, ReplicaLog, render_log
from replication.modes import get_mode
from replication.partition import PartitionReplica, truncation_offset

# ---------------------------------------------------------------------------- epoch cache


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(epoch, start) for epoch, start in pairs)


def test_end_offset_for_undefined_epoch_is_undefined() -> None:
    assert cache_of((2, 5), (4, 9)).end_offset_for(-1, 12) == (-1, -1)


def test_end_offset_for_latest_epoch_is_log_end_offset() -> None:
    assert cache_of((2, 5), (4, 9)).end_offset_for(4, 12) == (4, 12)


def test_end_offset_for_epoch_newer_than_every_entry_is_undefined() -> None:
    assert cache_of((2, 5), (4, 9)).end_offset_for(5, 12) == (-1, -1)


def test_end_offset_for_epoch_older_than_every_entry_keeps_epoch_and_first_start() -> None:
    assert cache_of((2, 5), (4, 9)).end_offset_for(1, 12) == (1, 5)


def test_end_offset_for_unknown_middle_epoch_answers_largest_smaller_epoch() -> None:
    assert cache_of((2, 5), (4, 9)).end_offset_for(3, 12) == (2, 9)


def test_end_offset_for_known_middle_epoch_ends_where_next_epoch_starts() -> None:
    assert cache_of((0, 0), (2, 5), (4, 9)).end_offset_for(2, 12) == (2, 9)


def test_end_offset_for_on_empty_cache() -> None:
    assert LeaderEpochCache().end_offset_for(0, 3) == (-1, -1)
    assert LeaderEpochCache().end_offset_for(-1, 3) == (-1, -1)


def test_assign_same_epoch_at_later_offset_is_a_no_op() -> None:
    cache = cache_of((1, 0))
    assert cache.assign(1, 4) is False
    assert cache.entries == (EpochEntry(1, 0),)


def test_assign_same_epoch_at_earlier_offset_replaces_it() -> None:
    cache = cache_of((0, 0), (1, 5))
    assert cache.assign(1, 3) is True
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 3))


def test_assign_drops_entries_with_larger_epoch_or_start() -> None:
    cache = cache_of((0, 0), (2, 1), (4, 2))
    cache.assign(3, 1)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(3, 1))


def test_truncate_from_end_removes_entries_starting_at_or_after_offset() -> None:
    cache = cache_of((0, 0), (2, 3), (4, 5))
    assert cache.truncate_from_end(3) is True
    assert cache.entries == (EpochEntry(0, 0),)
    assert cache.truncate_from_end(3) is False


def test_kip_101_answer_is_start_of_first_later_epoch() -> None:
    cache = cache_of((1, 0), (3, 2))
    assert cache.start_offset_after(3, 4) == 4
    assert cache.start_offset_after(2, 4) == 2
    assert cache.start_offset_after(1, 4) == 2
    assert cache.start_offset_after(0, 4) == -1
    assert cache.start_offset_after(7, 4) == -1


# ---------------------------------------------------------------------------- replica log


def test_append_assigns_epoch_only_when_epoch_grows() -> None:
    log = ReplicaLog()
    for epoch, value in ((0, "a"), (0, "b"), (2, "c"), (2, "d")):
        log.append(epoch, value)
    assert log.epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 2))
    assert log.log_end_offset == 4


def test_follower_append_must_start_at_log_end_offset() -> None:
    log = ReplicaLog.from_records([(0, "a")])
    with pytest.raises(ValueError, match="append at 3"):
        log.append_record(LogRecord(3, 0, "x"))


def test_truncate_clamps_high_watermark_and_epoch_cache() -> None:
    log = ReplicaLog.from_records([(0, "a"), (1, "b"), (2, "c")], high_watermark=3)
    log.truncate_to(1)
    assert render_log(log) == "[0:e0 a]"
    assert log.high_watermark == 1
    assert log.epoch_cache.entries == (EpochEntry(0, 0),)


def test_high_watermark_is_clamped_to_log_end_offset_and_may_go_down() -> None:
    log = ReplicaLog.from_records([(0, "a"), (0, "b")])
    log.update_high_watermark(9)
    assert log.high_watermark == 2
    log.update_high_watermark(1)
    assert log.high_watermark == 1


def test_crash_losing_unflushed_keeps_only_flushed_records() -> None:
    log = ReplicaLog.from_records([(0, "a"), (0, "b")], high_watermark=2)
    log.flush()
    log.append(3, "c")
    log.recover_after_crash(lose_unflushed=True)
    assert log.values() == ["a", "b"]
    assert log.epoch_cache.entries == (EpochEntry(0, 0),)
    assert log.high_watermark == 2


def test_crash_keeping_unflushed_keeps_everything() -> None:
    log = ReplicaLog.from_records([(0, "a"), (0, "b")])
    log.recover_after_crash(lose_unflushed=False)
    assert log.values() == ["a", "b"]


class RecordingStorage:
    """A LogStorage that records every call (and recovers what it was told)."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.records: list[LogRecord] = []
        self.flushed = 0
        self.high_watermark = 0
        self.entries: list[EpochEntry] = []

    def append(self, offset: int, leader_epoch: int, value: str) -> None:
        self.calls.append(("append", offset, leader_epoch, value))
        self.records.append(LogRecord(offset, leader_epoch, value))

    def truncate_to(self, end_offset: int) -> None:
        self.calls.append(("truncate_to", end_offset))
        self.records = [r for r in self.records if r.offset < end_offset]
        self.flushed = min(self.flushed, end_offset)

    def flush(self) -> None:
        self.calls.append(("flush",))
        self.flushed = len(self.records)

    def write_checkpoints(self, high_watermark: int, epoch_entries: Sequence[EpochEntry]) -> None:
        self.calls.append(("write_checkpoints", high_watermark, tuple(epoch_entries)))
        self.high_watermark = high_watermark
        self.entries = list(epoch_entries)

    def recover(self, lose_unflushed: bool) -> tuple[list[LogRecord], int, list[EpochEntry]]:
        self.calls.append(("recover", lose_unflushed))
        kept = self.records[: self.flushed] if lose_unflushed else list(self.records)
        return kept, self.high_watermark, list(self.entries)


def test_log_drives_storage_through_the_seam() -> None:
    storage = RecordingStorage()
    log = ReplicaLog(storage=storage)
    log.append(0, "a")
    log.flush()
    log.append(1, "b")
    log.update_high_watermark(1)
    log.truncate_to(1)
    assert storage.calls == [
        ("write_checkpoints", 0, ()),
        ("append", 0, 0, "a"),
        ("write_checkpoints", 0, (EpochEntry(0, 0),)),
        ("flush",),
        ("append", 1, 1, "b"),
        ("write_checkpoints", 0, (EpochEntry(0, 0), EpochEntry(1, 1))),
        ("write_checkpoints", 1, (EpochEntry(0, 0), EpochEntry(1, 1))),
        ("truncate_to", 1),
        ("write_checkpoints", 1, (EpochEntry(0, 0),)),
    ]


def test_recovery_reads_back_what_storage_kept() -> None:
    storage = RecordingStorage()
    log = ReplicaLog(storage=storage)
    log.append(0, "a")
    log.flush()
    log.append(0, "b")
    log.recover_after_crash(lose_unflushed=True)
    assert storage.calls[-1] == ("recover", True)
    assert log.values() == ["a"]


# ---------------------------------------------------------------------------- golden vectors


def fetcher_pair(
    leader_records: list[tuple[int, str]],
    follower_records: list[tuple[int, str]],
    leader_epoch: int,
) -> tuple[PartitionReplica, PartitionReplica]:
    """An in-memory leader endpoint and follower, as in AbstractFetcherThreadTest."""
    mode = get_mode("current")
    leader = PartitionReplica(
        1, (1, 2), mode, log=ReplicaLog.from_records(leader_records), min_insync_replicas=1
    )
    follower = PartitionReplica(2, (1, 2), mode, log=ReplicaLog.from_records(follower_records))
    leader.eligible_brokers = frozenset({1, 2})
    # the leader had cached this epoch at its LESO when it took over (R1.4)
    leader.become_leader(leader_epoch, 1, (1, 2), now_ms=0)
    follower.become_follower(1, leader_epoch, 1)
    return leader, follower


def fetch_round(leader: PartitionReplica, follower: PartitionReplica) -> tuple[object, str]:
    request = follower.fetch_request()
    response = leader.handle_fetch(request, now_ms=0)
    return response.diverging_epoch, follower.apply_fetch_response(response)


def test_diverging_epochs_vector() -> None:
    leader, follower = fetcher_pair(
        [(0, "a"), (2, "b"), (5, "d")], [(0, "a"), (2, "b"), (4, "c")], leader_epoch=5
    )
    assert (follower.fetch_request().fetch_offset, follower.fetch_request().last_fetched_epoch) == (
        3,
        4,
    )
    diverging, _ = fetch_round(leader, follower)
    assert diverging == (2, 2)
    assert render_log(follower.log) == "[0:e0 a, 1:e2 b]"
    assert follower.fetch_request().last_fetched_epoch == 2
    diverging, _ = fetch_round(leader, follower)
    assert diverging is None
    assert render_log(follower.log) == "[0:e0 a, 1:e2 b, 2:e5 d]"
    assert follower.fetch_request().last_fetched_epoch == 5


def test_truncation_vector_round_by_round() -> None:
    leader, follower = fetcher_pair(
        [(1, "a1"), (3, "b3"), (5, "c5")], [(0, "a0"), (2, "b2"), (4, "c4")], leader_epoch=5
    )
    rounds = []
    for _ in range(3):
        diverging, _ = fetch_round(leader, follower)
        rounds.append((diverging, follower.log.log_end_offset))
    assert rounds == [((3, 2), 2), ((1, 1), 1), ((0, 0), 0)]
    diverging, _ = fetch_round(leader, follower)
    assert diverging is None
    assert follower.log.records == leader.log.records


def test_truncation_offset_without_leader_offset_goes_to_high_watermark() -> None:
    follower = ReplicaLog.from_records([(0, "a"), (1, "b"), (1, "c")], high_watermark=1)
    assert truncation_offset(follower, 1, -1) == (1, True)


def test_truncation_offset_with_legacy_epoch_takes_min_of_offset_and_leo() -> None:
    follower = ReplicaLog.from_records([(0, "a"), (1, "b")])
    assert truncation_offset(follower, -1, 5) == (2, True)
    assert truncation_offset(follower, -1, 1) == (1, True)


def test_truncation_offset_without_local_answer_takes_leader_offset() -> None:
    follower = ReplicaLog.from_records([(3, "a"), (4, "b")])
    # follower's epochs are all newer than the leader's answer: no local epoch <= 7 is missing,
    # but nothing later than 9 either, so the local lookup is undefined
    assert follower.epoch_cache.end_offset_for(9, 2) == (-1, -1)
    assert truncation_offset(follower, 9, 1) == (1, True)


def test_truncation_offset_with_matching_epoch_is_min_of_both_ends() -> None:
    follower = ReplicaLog.from_records([(0, "a"), (2, "b"), (2, "c")])
    assert truncation_offset(follower, 2, 2) == (2, True)
    assert truncation_offset(follower, 0, 5) == (1, True)


def test_kip_279_follower_iterates_until_epochs_match() -> None:
    mode = get_mode("kip-279")
    leader = PartitionReplica(1, (1, 2), mode, log=ReplicaLog.from_records([(1, "a1"), (3, "b3")]))
    follower = PartitionReplica(
        2, (1, 2), mode, log=ReplicaLog.from_records([(0, "a0"), (2, "b2")])
    )
    leader.become_leader(5, 1, (1, 2), now_ms=0)
    follower.become_follower(1, 5, 1)
    answers = []
    while follower.truncating:
        epoch, end_offset = leader.end_offset_for_epoch(follower.epoch_request())
        follower.apply_epoch_answer(epoch, end_offset)
        answers.append(((epoch, end_offset), follower.log.log_end_offset))
    assert answers == [((1, 1), 1), ((0, 0), 0)]
