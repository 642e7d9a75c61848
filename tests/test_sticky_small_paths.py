"""The sticky engine's shortcuts for small groups give exactly what the steps they skip give.

Hypothesis draws the inputs a step receives inside the engine; the shortcut's result (owners,
deficits, holdings) must equal the full step's bit for bit.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ortools.graph.python import min_cost_flow
from strategies import groups, topic_claim_moves

from assignors import sticky
from assignors.arrays import GroupArrays

SETTINGS = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def draw_racks(data: st.DataObject, size: int, num_members: int) -> sticky._RackMap | None:
    if not data.draw(st.booleans()):
        return None
    num_racks = data.draw(st.integers(1, 4))
    local = np.asarray(
        data.draw(
            st.lists(
                st.lists(st.booleans(), min_size=num_racks, max_size=num_racks),
                min_size=size,
                max_size=size,
            )
        ),
        dtype=bool,
    )
    member_rack = np.asarray(
        data.draw(
            st.lists(st.integers(-1, num_racks - 1), min_size=num_members, max_size=num_members)
        ),
        dtype=np.int64,
    )
    return sticky._RackMap(local, member_rack)


@SETTINGS
@given(st.data())
def test_dealing_to_one_short_member_is_dealing_locally_then_round_robin(data):
    num_members = data.draw(st.integers(1, 8))
    size = data.draw(st.integers(1, 40))
    racks = draw_racks(data, size, num_members)
    pool = np.asarray(sorted(data.draw(st.sets(st.integers(0, size - 1)))), dtype=np.int64)
    deficits = np.zeros(num_members, dtype=np.int64)
    # mostly one member short (the shortcut), sometimes several (the full steps)
    for member in data.draw(st.sets(st.integers(0, num_members - 1), min_size=1, max_size=3)):
        deficits[member] = data.draw(st.integers(1, 45))
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    plain_owner, fast_owner = np.full(size, -1), np.full(size, -1)
    plain_deficits, fast_deficits = deficits.copy(), deficits.copy()
    left = pool
    if racks is not None:
        left = sticky._deal_local(pool, plain_deficits, rank, racks, plain_owner)
    sticky._deal(left, plain_deficits, rank, plain_owner)
    sticky._deal_with_racks(pool, fast_deficits, rank, racks, fast_owner)
    assert fast_owner.tolist() == plain_owner.tolist()
    assert fast_deficits.tolist() == plain_deficits.tolist()


@st.composite
def flow_inputs(draw):
    """(subscribers, claims, counts, loads, locality or None) as :func:`sticky._fewest_moves`
    receives them: topics with and without subscribers, claims up to each topic's size, loads
    anywhere (so Kafka's rule allows some subscribers and not others), racks on some members."""
    num_members = draw(st.integers(1, 9))
    num_topics = draw(st.integers(1, 6))
    counts = np.asarray(
        draw(st.lists(st.integers(0, 12), min_size=num_topics, max_size=num_topics)),
        dtype=np.int64,
    )
    subscribers, claims = [], []
    for count in counts.tolist():
        members = sorted(draw(st.sets(st.integers(0, num_members - 1), max_size=num_members)))
        subscribers.append(np.asarray(members, dtype=np.int64))
        claims.append(
            np.asarray(
                draw(st.lists(st.integers(0, count), min_size=len(members), max_size=len(members))),
                dtype=np.int64,
            )
        )
    loads = np.asarray(
        draw(st.lists(st.integers(0, 15), min_size=num_members, max_size=num_members)),
        dtype=np.int64,
    )
    locality = None
    if draw(st.booleans()):
        num_racks = draw(st.integers(1, 4))
        local_by_rack = np.asarray(
            [[draw(st.integers(0, count)) for _ in range(num_racks)] for count in counts.tolist()],
            dtype=np.int64,
        ).reshape(num_topics, num_racks)
        member_rack = np.asarray(
            draw(
                st.lists(st.integers(-1, num_racks - 1), min_size=num_members, max_size=num_members)
            ),
            dtype=np.int64,
        )
        locality = (local_by_rack, member_rack)
    return subscribers, claims, counts, loads, locality


def flow_arguments(subscribers, claims, counts, loads, locality):
    """The arguments the fewest-moves network builders take: the problem, each topic's first
    subscription edge (and the total), and the cost of a partition a member did not claim."""
    edge_offsets = np.concatenate(([0], np.cumsum([m.size for m in subscribers]))).astype(np.int64)
    new_cost = 1 if locality is None else int(counts.sum()) + 1
    return (subscribers, claims, counts, loads, edge_offsets, new_cost)


@SETTINGS
@given(flow_inputs())
def test_flow_arcs_on_lists_are_the_array_built_arcs(problem):
    subscribers, claims, counts, loads, locality = problem
    arguments = flow_arguments(subscribers, claims, counts, loads, locality)
    arrays = (
        sticky._plain_arcs(*arguments)
        if locality is None
        else sticky._rack_arcs(*arguments, locality)
    )
    lists = sticky._arcs_on_lists(*arguments, locality)
    for on_lists, on_arrays in zip(lists, arrays, strict=True):
        assert on_lists.dtype == on_arrays.dtype
        assert on_lists.tolist() == on_arrays.tolist()


@SETTINGS
@given(st.data())
def test_rack_local_dealing_on_lists_is_the_array_dealing(data):
    num_members = data.draw(st.integers(1, 10))
    size = data.draw(st.integers(1, 60))
    racks = draw_racks(data, size, num_members) or sticky._RackMap(
        np.ones((size, 1), dtype=bool), np.zeros(num_members, dtype=np.int64)
    )
    pool = np.asarray(sorted(data.draw(st.sets(st.integers(0, size - 1)))), dtype=np.int64)
    deficits = np.asarray(
        data.draw(st.lists(st.integers(-1, 15), min_size=num_members, max_size=num_members)),
        dtype=np.int64,
    )
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    array_owner, list_owner = np.full(size, -1), np.full(size, -1)
    array_deficits, list_deficits = deficits.copy(), deficits.copy()
    array_left = sticky._deal_local(pool, array_deficits, rank, racks, array_owner)
    list_left = sticky._deal_local_lists(pool, list_deficits, rank, racks, list_owner)
    assert list_left.dtype == array_left.dtype
    assert list_left.tolist() == array_left.tolist()
    assert list_owner.tolist() == array_owner.tolist()
    assert list_deficits.tolist() == array_deficits.tolist()


@SETTINGS
@given(st.data())
def test_spreading_skips_only_topics_water_filling_cannot_improve(data):
    """Nearly even loads, so many topics' free units already sit within one of their
    emptiest subscriber (skipped on lists) and some do not: the list sweeps must leave
    every placement and load as the array sweeps (which water-fill every topic) do."""
    num_members = data.draw(st.integers(2, 10))
    num_topics = data.draw(st.integers(1, 5))
    subscribers, kept, free = [], [], []
    for _ in range(num_topics):
        members = sorted(data.draw(st.sets(st.integers(0, num_members - 1), min_size=1)))
        subscribers.append(np.asarray(members, dtype=np.int64))
        kept.append(np.asarray([data.draw(st.integers(0, 2)) for _ in members], dtype=np.int64))
        free.append(np.asarray([data.draw(st.integers(0, 2)) for _ in members], dtype=np.int64))
    loads = np.zeros(num_members, dtype=np.int64)
    for members, held, placed in zip(subscribers, kept, free, strict=True):
        np.add.at(loads, members, held + placed)
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    order = sorted(range(num_topics), key=lambda p: (subscribers[p].size, p))
    on_arrays = ([placed.copy() for placed in free], loads.copy())
    sticky._spread_free_arrays(order, subscribers, kept, *on_arrays, rank)
    on_lists = ([placed.tolist() for placed in free], loads.tolist())
    members_of, held_of = [m.tolist() for m in subscribers], [h.tolist() for h in kept]
    sticky._spread_free_lists(order, members_of, held_of, *on_lists, rank.tolist())
    assert on_lists[0] == [p.tolist() for p in on_arrays[0]]
    assert on_lists[1] == on_arrays[1].tolist()


@SETTINGS
@given(topic_claim_moves(10, (3, 6)))
def test_moving_claims_stops_at_once_when_the_fullest_holder_is_within_one(problem):
    _assert_claims_move_alike(problem)


@SETTINGS
@given(st.data())
def test_subscribers_on_lists_are_the_array_built_subscribers(data):
    num_topics = data.draw(st.integers(1, 6))
    subscriptions = [
        tuple(sorted(data.draw(st.sets(st.integers(0, num_topics - 1)))))
        for _ in range(data.draw(st.integers(1, 12)))
    ]
    on_lists = sticky._subscribers(subscriptions, num_topics)
    on_arrays = sticky._subscribers_arrays(subscriptions, num_topics)
    assert len(on_lists) == len(on_arrays) == num_topics
    for listed, built in zip(on_lists, on_arrays, strict=True):
        assert listed.dtype == built.dtype
        assert listed.tolist() == built.tolist()


@SETTINGS
@given(flow_inputs(), st.data())
def test_tie_order_on_lists_is_the_array_tie_order(problem, data):
    subscribers, claims, _, loads, _ = problem
    if not any(members.size for members in subscribers):
        subscribers = [np.arange(loads.size, dtype=np.int64)]
        claims = [np.zeros(loads.size, dtype=np.int64)]
    free = [
        np.asarray([data.draw(st.integers(0, 2)) for _ in range(m.size)], dtype=np.int64)
        for m in subscribers
    ]
    rank = np.asarray(data.draw(st.permutations(range(loads.size))), dtype=np.int64)
    on_lists = sticky._tie_order(subscribers, claims, free, loads, rank)
    on_arrays = sticky._tie_order_arrays(subscribers, claims, free, loads, rank)
    assert on_lists.dtype == on_arrays.dtype
    assert on_lists.tolist() == on_arrays.tolist()


def _fresh_rack_map(group, subscriptions):
    saved = list(sticky._rack_tables)
    sticky._rack_tables.clear()
    try:
        return sticky._RackMap.build(group, group.partition_space(), subscriptions)
    finally:
        sticky._rack_tables[:] = saved


def _same_rack_map(made, fresh) -> None:
    assert (made is None) == (fresh is None)
    if made is not None:
        assert made.local.tolist() == fresh.local.tolist()
        assert made.member_rack.tolist() == fresh.member_rack.tolist()
        assert made.topic_local.tolist() == fresh.topic_local.tolist()
        assert (made.codes is None) == (fresh.codes is None)
        if made.codes is not None:
            assert made.codes.tolist() == fresh.codes.tolist()


@SETTINGS
@given(
    groups(max_members=8, max_topics=4, max_partitions=10, racks=True),
    groups(max_members=8, max_topics=4, max_partitions=10, racks=True),
    st.booleans(),
    st.data(),
)
def test_a_remembered_rack_table_serves_only_the_same_topics_and_racks(
    first, second, share_topics, data
):
    """The rack map of ``second`` made right after ``first`` (whose table is remembered) is
    the map made from nothing: when ``second`` reuses ``first``'s topic objects (as a replay's
    generations do) and its consumer racks, the table is reused, else it is made again."""
    from assignors.model import Group, Member

    if share_topics:
        # same topic objects, members re-drawn from the second group with racks of either
        racks = sorted({m.rack for m in first.members if m.rack is not None}) or [None]
        second = Group(
            first.topics,
            tuple(
                Member(m.member_id, m.topics, rack=data.draw(st.sampled_from([*racks, "r-new"])))
                for m in second.members
            ),
        )
    sticky._RackMap.build(first, first.partition_space(), GroupArrays.of(first).subscriptions)
    subscriptions = GroupArrays.of(second).subscriptions
    made = sticky._RackMap.build(second, second.partition_space(), subscriptions)
    _same_rack_map(made, _fresh_rack_map(second, subscriptions))
    # and again, now certainly from the remembered table
    again = sticky._RackMap.build(second, second.partition_space(), subscriptions)
    _same_rack_map(again, _fresh_rack_map(second, subscriptions))


@SETTINGS
@given(
    groups(max_members=8, max_topics=4, max_partitions=10, racks=True),
    st.lists(st.lists(st.sampled_from([None, "r0", "r1", "r2"]), min_size=8, max_size=8)),
)
def test_remembered_rack_tables_serve_racks_that_come_and_go(group, rack_rounds):
    """Members of the same topics (the same objects) change racks from round to round, so the
    consumer rack names come and go and remembered tables of earlier rounds are served again:
    each round's map is the map made from nothing."""
    from assignors.model import Group, Member

    for racks in rack_rounds:
        members = tuple(
            Member(m.member_id, m.topics, rack=rack)
            for m, rack in zip(group.members, racks, strict=False)
        )
        here = Group(group.topics, members)
        subscriptions = GroupArrays.of(here).subscriptions
        made = sticky._RackMap.build(here, here.partition_space(), subscriptions)
        _same_rack_map(made, _fresh_rack_map(here, subscriptions))
    assert len(sticky._rack_tables) <= sticky.RACK_TABLES


@SETTINGS
@given(groups(max_members=8, max_topics=4, max_partitions=10, racks=True))
def test_rack_map_counts_each_topics_partitions_with_a_replica_on_each_rack(group):
    subscriptions = GroupArrays.of(group).subscriptions
    space = group.partition_space()
    made = _fresh_rack_map(group, subscriptions)
    assume(made is not None)
    starts = np.asarray(space.offsets, dtype=np.int64)
    counts = np.asarray(space.partition_counts, dtype=np.int64)
    running = np.zeros((made.local.shape[0] + 1, made.local.shape[1]), dtype=np.int64)
    np.cumsum(made.local, axis=0, out=running[1:])
    expected = running[starts + counts] - running[starts]
    assert made.topic_local.dtype == expected.dtype
    assert made.topic_local.tolist() == expected.tolist()


@SETTINGS
@given(st.data())
def test_racks_are_indifferent_exactly_when_each_members_topics_are_all_or_none_local(data):
    """The rack table's topic sets per rack give the verdict of the counts themselves: every
    member with a rack finds all its subscribed topics wholly on its rack, or none of them."""
    num_topics = data.draw(st.integers(1, 5))
    num_racks = data.draw(st.integers(1, 3))
    counts = np.asarray(
        data.draw(st.lists(st.integers(0, 4), min_size=num_topics, max_size=num_topics)),
        dtype=np.int64,
    )
    topic_local = np.asarray(
        [[data.draw(st.integers(0, count)) for _ in range(num_racks)] for count in counts.tolist()],
        dtype=np.int64,
    ).reshape(num_topics, num_racks)
    num_members = data.draw(st.integers(1, 6))
    member_racks = data.draw(
        st.lists(st.integers(-1, num_racks - 1), min_size=num_members, max_size=num_members)
    )
    subscriptions = [
        tuple(sorted(data.draw(st.sets(st.integers(0, num_topics - 1))))) for _ in member_racks
    ]
    table = sticky._RackTable(
        np.zeros((0, num_racks), dtype=bool),
        None,
        topic_local,
        everywhere=sticky._topics_by_rack(topic_local == counts[:, None]),
        nowhere=sticky._topics_by_rack(topic_local == 0),
    )
    everywhere, nowhere = topic_local == counts[:, None], topic_local == 0
    expected = all(
        everywhere[list(subscription), rack].all() or nowhere[list(subscription), rack].all()
        for rack, subscription in zip(member_racks, subscriptions, strict=True)
        if rack >= 0 and subscription
    )
    assert sticky._indifferent(table, member_racks, subscriptions) == expected


@SETTINGS
@given(flow_inputs())
def test_flow_network_on_lists_is_the_array_built_network(problem):
    subscribers, claims, counts, loads, locality = problem
    arguments = flow_arguments(subscribers, claims, counts, loads, locality)
    num_topics, num_members = len(subscribers), loads.size
    topic_nodes = 1 + np.arange(num_topics, dtype=np.int64)
    member_nodes = 1 + num_topics + np.arange(num_members, dtype=np.int64)
    sink = 1 + num_topics + num_members
    arrays = sticky._network_on_arrays(arguments, locality, topic_nodes, member_nodes, sink)
    lists = sticky._arcs_on_lists(*arguments, locality, ends=True)
    for on_lists, on_arrays in zip(lists, arrays, strict=True):
        assert on_lists.dtype == on_arrays.dtype
        assert on_lists.tolist() == on_arrays.tolist()


def fewest_moves_on_arrays(subscribers, claims, counts, loads, locality):
    """:func:`sticky._fewest_moves` with the network built on arrays and the flows summed per
    edge with ``np.add.at``, as it was before small networks were built on lists."""
    num_topics, num_members = len(subscribers), loads.size
    sink = 1 + num_topics + num_members
    num_racks = locality[0].shape[1] if locality is not None else 0
    arguments = flow_arguments(subscribers, claims, counts, loads, locality)
    edge_offsets = arguments[4]
    tails, heads, capacities, costs, edges = sticky._network_on_arrays(
        arguments,
        locality,
        1 + np.arange(num_topics, dtype=np.int64),
        1 + num_topics + np.arange(num_members, dtype=np.int64),
        sink,
    )
    flow = sticky.min_cost_flow.SimpleMinCostFlow()
    arcs = flow.add_arcs_with_capacity_and_unit_cost(tails, heads, capacities, costs)
    num_nodes = sink + 1 + num_topics * num_racks
    supplies = np.zeros(num_nodes, dtype=np.int64)
    supplies[0], supplies[sink] = int(counts.sum()), -int(counts.sum())
    flow.set_nodes_supplies(np.arange(num_nodes, dtype=np.int64), supplies)
    if flow.solve() != flow.OPTIMAL:
        return None
    flows = flow.flows(arcs)
    feeding = edges >= 0
    held = np.zeros(int(edge_offsets[-1]), dtype=np.int64)
    np.add.at(held, edges[feeding], flows[feeding])
    return [held[edge_offsets[p] : edge_offsets[p + 1]] for p in range(num_topics)]


@SETTINGS
@given(flow_inputs())
def test_fewest_moves_on_a_small_network_is_the_array_built_flow(problem):
    subscribers, claims, counts, loads, locality = problem
    found = sticky._fewest_moves(subscribers, claims, counts, loads, locality)
    reference = fewest_moves_on_arrays(subscribers, claims, counts, loads, locality)
    assert (found is None) == (reference is None)
    if found is not None:
        for held, expected in zip(found, reference, strict=True):
            assert held.dtype == expected.dtype
            assert held.tolist() == expected.tolist()


def fewest_moves_fresh(trials, loads, allowed):
    """The claims the load search's fewest-moves flow loses at ``loads``, on a network built
    for this one trial (source, topics, members, sink; cost 1 on the arcs the claims do not
    cover): the reference the reused network is checked against."""
    num_topics, num_members = trials.counts.size, loads.size
    num_edges = trials.member.size
    sink = 1 + num_topics + num_members
    member_nodes = 1 + num_topics + trials.member
    tails = np.concatenate(
        (
            np.zeros(num_topics, dtype=np.int64),
            1 + trials.topic,
            1 + trials.topic,
            1 + num_topics + np.arange(num_members, dtype=np.int64),
        )
    )
    heads = np.concatenate(
        (
            1 + np.arange(num_topics, dtype=np.int64),
            member_nodes,
            member_nodes,
            np.full(num_members, sink, dtype=np.int64),
        )
    )
    capacities = np.concatenate(
        (
            trials.counts,
            np.where(allowed, trials.claimed, 0),
            np.where(allowed, trials.size, 0),
            loads.astype(np.int64),
        )
    )
    costs = np.zeros(tails.size, dtype=np.int64)
    costs[num_topics + num_edges : num_topics + 2 * num_edges] = 1
    flow = min_cost_flow.SimpleMinCostFlow()
    flow.add_arcs_with_capacity_and_unit_cost(tails, heads, capacities, costs)
    total = int(trials.counts.sum())
    supplies = np.zeros(sink + 1, dtype=np.int64)
    supplies[0], supplies[sink] = total, -total
    flow.set_nodes_supplies(np.arange(sink + 1, dtype=np.int64), supplies)
    if flow.solve() != flow.OPTIMAL:
        return None
    return int(trials.claimed.sum()) - (total - int(flow.optimal_cost()))


@SETTINGS
@given(flow_inputs(), st.data())
def test_load_trials_reusing_one_network_give_each_trial_its_own_networks_answer(problem, data):
    subscribers, claims, counts, loads, _ = problem
    assume(any(members.size for members in subscribers))
    trials = sticky._LoadTrials.of(subscribers, claims, counts)
    others = data.draw(
        st.lists(st.lists(st.integers(0, 15), min_size=loads.size, max_size=loads.size), max_size=6)
    )
    tried = np.asarray([loads.tolist(), *others], dtype=np.int64)
    _, allowed = trials.bounds(tried)
    # one after another on the same object: each solve starts from the previous trial's network
    for row in range(tried.shape[0]):
        reused = trials.fewest_moves(tried[row], allowed[row])
        assert reused == fewest_moves_fresh(trials, tried[row], allowed[row])


@SETTINGS
@given(flow_inputs(), st.data())
def test_claim_edges_are_each_claims_topic_and_holder(problem, data):
    subscribers, _, counts, loads, _ = problem
    num_members = loads.size
    topic_of = np.repeat(np.arange(counts.size), counts)
    # each partition claimed by one of its topic's subscribers, or by nobody
    claimant = np.asarray(
        [
            data.draw(st.sampled_from([-1, *subscribers[topic].tolist()]))
            for topic in topic_of.tolist()
        ],
        dtype=np.int64,
    )
    edges = sticky._Edges.of(subscribers, num_members)
    valid = sticky._ClaimEdges.of(edges, claimant, topic_of)
    # edges in (topic, member) order, numbered from the subscriber lists themselves
    pairs = [(topic, m) for topic, members in enumerate(subscribers) for m in members.tolist()]
    edge_of = {pair: edge for edge, pair in enumerate(pairs)}
    claimed = [p for p, holder in enumerate(claimant.tolist()) if holder >= 0]
    assert valid.claimed.tolist() == claimed
    assert valid.holders.tolist() == [int(claimant[p]) for p in claimed]
    expected = [edge_of[int(topic_of[p]), int(claimant[p])] for p in claimed]
    assert valid.edge.tolist() == expected
    assert valid.per_edge.tolist() == np.bincount(expected, minlength=edges.key.size).tolist()
    assert edges.offsets.tolist() == [0, *np.cumsum([m.size for m in subscribers]).tolist()]


@SETTINGS
@given(topic_claim_moves(64, (0, 5)))
def test_moving_claims_on_lists_among_many_tied_subscribers_moves_what_the_array_steps_move(
    problem,
):
    """Up to the list path's topic size, loads drawn from a few values: many subscribers tie
    on load, so each step's donor, receiver and the runners-up are decided by rank."""
    _assert_claims_move_alike(problem)


def _assert_claims_move_alike(problem):
    """The list path moves a topic's claims as the array steps do, to the same arrays."""
    members, holding, placed, loads, rank = problem
    on_arrays = (holding.copy(), placed.copy(), loads.copy())
    on_lists = (holding.copy(), placed.copy(), loads.copy())
    moved = sticky._move_topic_claims(members, *on_arrays, rank)
    assert sticky._move_topic_claims_small(members, *on_lists, rank) == moved
    assert [a.tolist() for a in on_lists] == [a.tolist() for a in on_arrays]
