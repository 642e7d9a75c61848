"""Shared by the on-disk replica log tests: appending values to a ``DiskLogStorage``, and the
random ``ReplicaLog`` operations (append, new epoch, truncate, high watermark, flush, crash)
that property tests run against it."""

from __future__ import annotations

from hypothesis import strategies as st

from replication.log import ReplicaLog
from replication.storage import DiskLogStorage

# ReplicaLog operations: (name, argument)
log_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.text(max_size=6)),
        st.tuples(st.just("epoch"), st.integers(0, 3)),
        st.tuples(st.just("truncate"), st.integers(0, 25)),
        st.tuples(st.just("hw"), st.integers(0, 25)),
        st.tuples(st.just("flush"), st.none()),
        st.tuples(st.just("crash"), st.booleans()),
    ),
    max_size=40,
)


def fill(storage: DiskLogStorage, values: list[str], *, epoch: int = 0, start: int = 0) -> None:
    for offset, value in enumerate(values, start=start):
        storage.append(offset, epoch, value, timestamp_ms=1_000 + offset)


def apply_log_op(log: ReplicaLog, name: str, argument: object, epoch: int) -> int:
    """Run one of ``log_ops`` on ``log`` (appends go in ``epoch``); returns the epoch after it
    (an ``epoch`` operation moves to the larger of the two and assigns it at the log end)."""
    if name == "append":
        log.append(epoch, str(argument))
    elif name == "epoch":
        epoch = max(epoch, int(argument))  # type: ignore[call-overload]
        log.assign_epoch(epoch, log.log_end_offset)
    elif name == "truncate":
        log.truncate_to(int(argument))  # type: ignore[call-overload]
    elif name == "hw":
        log.update_high_watermark(int(argument))  # type: ignore[call-overload]
    elif name == "flush":
        log.flush()
    else:
        log.recover_after_crash(lose_unflushed=bool(argument))
    return epoch
