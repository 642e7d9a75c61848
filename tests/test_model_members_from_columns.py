"""Member.all_checked: members made from columns, slot by slot over all of them, are the
members Member.checked makes one at a time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.model import Member, OwnedPartitions, PartitionSpace, TopicPartition

SPACE = PartitionSpace(("a", "b"), (3, 2))
NAMES = st.text(alphabet="abc-0123", min_size=1, max_size=6)
OWNED = st.one_of(
    st.just(()),
    st.lists(st.integers(0, 4), unique=True).map(
        lambda indexes: OwnedPartitions(SPACE, sorted(indexes))
    ),
    st.lists(st.integers(0, 2), unique=True).map(
        lambda numbers: tuple(TopicPartition("a", number) for number in sorted(numbers))
    ),
)
ROWS = st.lists(
    st.tuples(
        NAMES,
        st.frozensets(st.sampled_from(("a", "b", "c"))),
        OWNED,
        st.integers(-1, 9),
        st.one_of(st.none(), NAMES),
        st.one_of(st.none(), NAMES),
    ),
    max_size=12,
)
SLOTS = ("member_id", "topics", "owned_partitions", "generation", "rack", "instance_id")


@settings(max_examples=80, deadline=None, database=None)
@given(ROWS)
def test_members_made_from_columns_equal_members_checked_one_at_a_time(
    rows: list[Any],
) -> None:
    columns = tuple(tuple(column) for column in zip(*rows, strict=True)) or ((),) * 6
    made = Member.all_checked(*columns)
    one_at_a_time = tuple(Member.checked(*row) for row in rows)
    assert made == one_at_a_time
    for left, right in zip(made, one_at_a_time, strict=True):
        assert type(left) is Member
        for slot in SLOTS:
            assert getattr(left, slot) is getattr(right, slot), slot


def test_members_from_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        Member.all_checked(("c0", "c1"), (frozenset(),), ((), ()), (1, 1), (None,) * 2, (None,) * 2)
