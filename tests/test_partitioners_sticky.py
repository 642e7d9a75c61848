"""KIP-480 and KIP-794 sticky partitioning of unkeyed records."""

from __future__ import annotations

import random
from collections import Counter

from partitioners.base import LoadStats, TopicMetadata
from partitioners.sticky import (
    BuiltInSticky,
    Kip480Sticky,
    cumulative_frequency_table,
    load_weights,
    pick_weighted,
)


def test_kip794_queue_example_0_3_1_gives_weights_4_1_3_and_table_4_5_8():
    assert load_weights([0, 3, 1]) == [4, 1, 3]
    assert cumulative_frequency_table([0, 3, 1]) == [4, 5, 8]
    assert [pick_weighted([4, 5, 8], draw) for draw in range(8)] == [0, 0, 0, 0, 1, 2, 2, 2]


def test_builtin_draws_partitions_in_proportion_to_the_queue_weights():
    builtin = BuiltInSticky(random.Random(9), batch_size=1)
    metadata = TopicMetadata.all_available(3)
    builtin.on_load_stats("t", LoadStats((0, 3, 1), (0, 1, 2), excluded_any=False))
    drawn = Counter()
    for _ in range(16000):
        partition = builtin.choose("t", None, metadata, 0)
        drawn[partition] += 1
        builtin.on_append("t", partition, 2, last_batch_full=True, metadata=metadata)
    # the first choice is drawn before statistics matter only if none were set; all 16000 are
    assert abs(drawn[0] / 16000 - 4 / 8) < 0.02
    assert abs(drawn[1] / 16000 - 1 / 8) < 0.02
    assert abs(drawn[2] / 16000 - 3 / 8) < 0.02


def test_equal_queues_with_nothing_excluded_mean_uniform_choice():
    builtin = BuiltInSticky(random.Random(9))
    builtin.on_load_stats("t", LoadStats((2, 2, 2), (0, 1, 2), excluded_any=False))
    assert "t" not in builtin._stats


def test_builtin_stays_until_batch_size_and_a_full_last_batch():
    builtin = BuiltInSticky(random.Random(3), batch_size=1000)
    metadata = TopicMetadata.all_available(50)
    first = builtin.choose("t", None, metadata, 0)
    builtin.on_append("t", first, 999, last_batch_full=True, metadata=metadata)
    assert builtin.produced_bytes("t") == 999
    builtin.on_append("t", first, 1, last_batch_full=False, metadata=metadata)
    assert builtin.produced_bytes("t") == 1000  # enough bytes, but the batch is still open
    builtin.on_append("t", first, 1, last_batch_full=True, metadata=metadata)
    assert builtin.produced_bytes("t") == 0  # switched


def test_builtin_switches_unconditionally_at_twice_batch_size():
    builtin = BuiltInSticky(random.Random(3), batch_size=1000)
    metadata = TopicMetadata.all_available(50)
    first = builtin.choose("t", None, metadata, 0)
    builtin.on_append("t", first, 1999, last_batch_full=False, metadata=metadata)
    assert builtin.produced_bytes("t") == 1999
    builtin.on_append("t", first, 1, last_batch_full=False, metadata=metadata)
    assert builtin.produced_bytes("t") == 0


def test_builtin_uniform_choice_only_uses_partitions_with_a_leader():
    builtin = BuiltInSticky(random.Random(5), batch_size=1)
    metadata = TopicMetadata(10, available_partitions=(2, 7))
    seen = set()
    for _ in range(200):
        partition = builtin.choose("t", None, metadata, 0)
        seen.add(partition)
        builtin.on_append("t", partition, 5, last_batch_full=True, metadata=metadata)
    assert seen == {2, 7}


def test_kip480_moves_only_when_the_sticky_partition_opened_the_batch_and_never_to_itself():
    sticky = Kip480Sticky(random.Random(8))
    metadata = TopicMetadata.all_available(4)
    current = sticky.choose("t", None, metadata, 0)
    other = (current + 1) % 4
    sticky.on_new_batch("t", metadata, other)  # a keyed record's batch: no move
    assert sticky.choose("t", None, metadata, 0) == current
    for _ in range(50):
        sticky.on_new_batch("t", metadata, current)
        moved = sticky.choose("t", None, metadata, 0)
        assert moved != current
        current = moved


def test_kip480_with_one_available_partition_takes_it():
    sticky = Kip480Sticky(random.Random(8))
    assert sticky.choose("t", None, TopicMetadata(6, (4,)), 0) == 4
