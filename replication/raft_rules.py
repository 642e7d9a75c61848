"""Raft's two quorum rules, shared by the KRaft metadata quorum (``replication.kraft.raft``) and
the data-plane ``majority`` mode (``replication.partition``, ``replication.controller``).

A leader's high watermark is the largest offset a majority of voters holds (the median of
three), and a voter grants its vote only to a candidate whose log, compared by
(last epoch, end offset), is at least as up to date as its own (``canGrantVote`` in Kafka's
``QuorumState``; Raft section 5.4.1). A candidate wins with the votes of a majority, so it holds
every entry a majority held, which is every committed entry:

>>> majority_high_watermark([5, 3, 1])  # replicas at offsets 5, 3 and 1: 3 is on two of three
3
>>> votes = {1: (2, 5), 2: (2, 3), 3: (1, 7)}  # broker -> (last epoch, end offset)
>>> [candidate for candidate in votes if wins_vote(votes[candidate], votes.values(), voters=3)]
[1, 2]

Replica 3 has the longest log but the oldest last epoch: only its own vote, so it cannot lead.

This module imports nothing of ktk, so both the metadata quorum and the data plane depend on it
and neither on the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

LogPosition = tuple[int, int]


def is_majority(count: int, voters: int) -> bool:
    """More than half of ``voters``.

    >>> is_majority(2, 3), is_majority(2, 4), is_majority(1, 1)
    (True, False, True)
    """
    return count > voters // 2


def log_at_least(candidate: LogPosition, voter: LogPosition) -> bool:
    """The candidate's (last epoch, end offset) is at least the voter's: a later last epoch
    wins whatever the length; in the same epoch the longer log wins.

    >>> log_at_least((3, 1), (2, 9)), log_at_least((2, 8), (2, 9)), log_at_least((2, 9), (2, 9))
    (True, False, True)
    """
    return candidate >= voter


def majority_high_watermark(offsets: Sequence[int]) -> int:
    """The largest offset at least a majority of ``offsets`` (one per voter) reaches.

    >>> majority_high_watermark([4, 4, 0, 0]), majority_high_watermark([7])
    (0, 7)
    """
    ordered = sorted(offsets, reverse=True)
    return ordered[len(ordered) // 2]


def wins_vote(candidate: LogPosition, voters_heard: Iterable[LogPosition], *, voters: int) -> bool:
    """Does a candidate at ``candidate`` collect a majority of ``voters`` among the positions
    of the voters it reaches (its own included)?"""
    granted = sum(1 for voter in voters_heard if log_at_least(candidate, voter))
    return is_majority(granted, voters)
