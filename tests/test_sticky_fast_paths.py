"""The sticky engine's shortcuts give exactly the answers of the plain steps they replace.

Each plain step is written here as the engine first had it (one flow per question); hypothesis
draws small heterogeneous groups, with claims and racks, and the shortcut must agree with it
bit for bit (same per-topic holdings, same loads), not merely as well.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import groups, topic_claim_moves

from assignors import sticky
from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.sticky import StickyAssignor

SETTINGS = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def claims_lost(claims, holdings):
    """The claims a set of per-topic holdings does not keep (each edge keeps at most what it
    claimed)."""
    return sum(
        int(np.maximum(own - held, 0).sum()) for own, held in zip(claims, holdings, strict=True)
    )


def plain_search_loads(subscribers, claims, counts, loads, holdings, window):
    """The load search with one full :func:`sticky._fewest_moves` flow per trial."""
    low, high = window
    best_moves = claims_lost(claims, holdings)
    active = np.flatnonzero(np.bincount(np.concatenate(subscribers), minlength=loads.size)).tolist()
    trials = 0
    while best_moves > 0 and trials < sticky.LOAD_SEARCH_TRIALS:
        kept = np.zeros(loads.size, dtype=np.int64)
        for members, own, held in zip(subscribers, claims, holdings, strict=True):
            np.add.at(kept, members, np.minimum(own, held))
        givers = np.flatnonzero(loads > kept).tolist()
        improved = None
        for giver, taker in (
            (g, t) for g in givers for t in active if g != t and loads[g] > low and loads[t] < high
        ):
            if trials >= sticky.LOAD_SEARCH_TRIALS:
                break
            trials += 1
            trial = loads.copy()
            trial[giver] -= 1
            trial[taker] += 1
            found = sticky._fewest_moves(subscribers, claims, counts, trial)
            if found is not None and claims_lost(claims, found) < best_moves:
                best_moves, improved = claims_lost(claims, found), (trial, found)
        if improved is None:
            break
        loads[:], holdings = improved
    return holdings


@st.composite
def load_problems(draw):
    """(subscribers, claims, counts, loads, holdings, window) as the engine hands them to the
    load search: every topic has subscribers, claims are a part of each topic held by its
    subscribers (often piled on a few of them, so keeping them all breaks the balance), and
    the loads are those of a complete assignment made mostly least-loaded-first, so that
    Kafka's rule usually allows them."""
    num_members = draw(st.integers(2, 8))
    num_topics = draw(st.integers(1, 5))
    counts = np.asarray(
        draw(st.lists(st.integers(1, 12), min_size=num_topics, max_size=num_topics)),
        dtype=np.int64,
    )
    subscribers, claims = [], []
    loads = np.zeros(num_members, dtype=np.int64)
    for count in counts.tolist():
        members = np.asarray(
            sorted(draw(st.sets(st.integers(0, num_members - 1), min_size=1))), dtype=np.int64
        )
        subscribers.append(members)
        favoured = draw(st.integers(0, members.size - 1))
        owners = draw(
            st.lists(
                st.one_of(st.just(favoured), st.integers(-1, members.size - 1)),
                min_size=count,
                max_size=count,
            )
        )
        claims.append(np.bincount([o for o in owners if o >= 0], minlength=members.size))
        for _ in range(count):
            if draw(st.integers(0, 9)) == 0:
                taker = members[draw(st.integers(0, members.size - 1))]
            else:
                taker = members[int(np.argmin(loads[members]))]
            loads[taker] += 1
    holdings = sticky._fewest_moves(subscribers, claims, counts, loads)
    active = np.flatnonzero(np.bincount(np.concatenate(subscribers), minlength=num_members))
    low = max(0, int(loads[active].min()) - draw(st.integers(0, 3)))
    high = int(loads[active].max()) + draw(st.integers(0, 3))
    return subscribers, claims, counts, loads, holdings, (low, high)


@SETTINGS
@given(load_problems(), st.sampled_from([sticky.LOAD_SEARCH_TRIALS, 1, 7, 40]))
def test_screened_load_search_matches_one_flow_per_trial(problem, budget):
    subscribers, claims, counts, loads, holdings, window = problem
    if holdings is None:  # these loads break Kafka's rule: the engine never searches from them
        return
    original = sticky.LOAD_SEARCH_TRIALS
    sticky.LOAD_SEARCH_TRIALS = budget
    try:
        plain_loads, fast_loads = loads.copy(), loads.copy()
        plain = plain_search_loads(subscribers, claims, counts, plain_loads, holdings, window)
        fast = sticky._search_loads(subscribers, claims, counts, fast_loads, holdings, window)
    finally:
        sticky.LOAD_SEARCH_TRIALS = original
    assert fast_loads.tolist() == plain_loads.tolist()
    assert [held.tolist() for held in fast] == [held.tolist() for held in plain]


@SETTINGS
@given(load_problems(), st.data())
def test_load_trial_bounds_never_exceed_the_claims_the_flow_loses(problem, data):
    """The screen of the load search is a lower bound: a trial it rules out (or calls
    infeasible) is one whose own flow loses at least that many claims (or finds no
    assignment), for the search's trials (one unit of load from one member to another) and
    for any loads adding up to the partitions."""
    subscribers, claims, counts, loads, _, _ = problem
    num_members = loads.size
    moved = data.draw(
        st.lists(
            st.tuples(st.integers(0, num_members - 1), st.integers(0, num_members - 1)),
            max_size=8,
        )
    )
    rows = [loads.tolist()]
    for giver, taker in moved:
        if loads[giver] > 0:
            row = loads.copy()
            row[giver] -= 1
            row[taker] += 1
            rows.append(row.tolist())
    total = int(counts.sum())
    for shares in data.draw(
        st.lists(
            st.lists(st.integers(0, 9), min_size=num_members, max_size=num_members), max_size=4
        )
    ):
        # loads of the same sum, spread in proportion to the drawn shares
        weights = np.asarray(shares, dtype=np.int64) + 1
        row = total * weights // int(weights.sum())
        row[int(np.argmax(weights))] += total - int(row.sum())
        rows.append(row.tolist())
    tried = np.asarray(rows, dtype=np.int64)
    trials = sticky._LoadTrials.of(subscribers, claims, counts)
    bounds, _ = trials.bounds(tried)
    for row in range(tried.shape[0]):
        found = sticky._fewest_moves(subscribers, claims, counts, tried[row].copy())
        if found is None:
            continue
        assert bounds[row] <= claims_lost(claims, found)


@SETTINGS
@given(
    groups(
        max_members=10, max_topics=5, max_partitions=12, subscription="heterogeneous", owned=True
    )
)
def test_sticky_answers_match_the_plain_steps(group):
    fast = StickyAssignor().assign(group)
    fast_cooperative = CooperativeStickyAssignor().assign(group)
    saved = sticky._search_loads
    sticky._search_loads = plain_search_loads
    try:
        plain = StickyAssignor().assign(group)
        plain_cooperative = CooperativeStickyAssignor().assign(group)
    finally:
        sticky._search_loads = saved
    assert fast.owners.tolist() == plain.owners.tolist()
    assert fast_cooperative.owners.tolist() == plain_cooperative.owners.tolist()
    assert fast_cooperative.withheld_indexes.tolist() == plain_cooperative.withheld_indexes.tolist()


def plain_rack_arcs(subscribers, claims, counts, loads, new_cost, locality):
    """The subscription arcs of :func:`sticky._fewest_moves` with racks, one topic at a time."""
    local_by_rack, member_rack = locality
    num_topics, num_racks = len(subscribers), local_by_rack.shape[1]
    rack_base = 2 + num_topics + loads.size
    edge_offsets = np.concatenate(([0], np.cumsum([m.size for m in subscribers])))
    arcs = []
    for position, members in enumerate(subscribers):
        if members.size == 0:
            continue
        slots = np.flatnonzero(loads[members] <= int(loads[members].min()) + 1)
        allowed = members[slots]
        size = int(counts[position])
        edge = edge_offsets[position] + slots
        for k, member in enumerate(allowed.tolist()):
            arcs.append(
                (1 + position, 1 + num_topics + member, claims[position][slots[k]], 0, edge[k])
            )
        for k, member in enumerate(allowed.tolist()):
            arcs.append((1 + position, 1 + num_topics + member, size, new_cost + 1, edge[k]))
        racks_here = member_rack[allowed]
        for rack in np.unique(racks_here[racks_here >= 0]).tolist():
            local_count = int(local_by_rack[position, rack])
            if local_count == 0:
                continue
            rack_node = rack_base + position * num_racks + rack
            arcs.append((1 + position, rack_node, local_count, new_cost, -1))
            for k in np.flatnonzero(racks_here == rack).tolist():
                arcs.append((rack_node, 1 + num_topics + int(allowed[k]), size, 0, edge[k]))
    return [list(column) for column in zip(*arcs, strict=True)] if arcs else [[]] * 5


@SETTINGS
@given(load_problems(), st.data())
def test_rack_arcs_are_the_arcs_of_one_topic_at_a_time(problem, data):
    subscribers, claims, counts, loads, _, _ = problem
    num_racks = data.draw(st.integers(1, 3))
    local_by_rack = np.asarray(
        [[data.draw(st.integers(0, int(count))) for _ in range(num_racks)] for count in counts],
        dtype=np.int64,
    )
    member_rack = np.asarray(
        [data.draw(st.integers(-1, num_racks - 1)) for _ in range(loads.size)], dtype=np.int64
    )
    new_cost = int(counts.sum()) + 1
    edge_offsets = np.concatenate(([0], np.cumsum([m.size for m in subscribers])))
    fast = sticky._rack_arcs(
        subscribers, claims, counts, loads, edge_offsets, new_cost, (local_by_rack, member_rack)
    )
    plain = plain_rack_arcs(
        subscribers, claims, counts, loads, new_cost, (local_by_rack, member_rack)
    )
    assert [column.tolist() for column in fast] == plain
    by_topic = sticky._rack_arcs_by_topic(
        subscribers, claims, counts, loads, edge_offsets, new_cost, (local_by_rack, member_rack)
    )
    assert [column.tolist() for column in by_topic] == plain


def plain_deal(pool, deficits, rank, owner):
    """Round-robin dealing through a sort of (round, rank) over every unit of deficit."""
    needy = np.flatnonzero(deficits > 0)
    if needy.size == 0 or pool.size == 0:
        return
    needy = needy[np.argsort(rank[needy], kind="stable")]
    takers = np.repeat(needy, deficits[needy])
    rounds = sticky._position_in_run(takers)
    sequence = takers[np.lexsort((np.repeat(np.arange(needy.size), deficits[needy]), rounds))]
    dealt = min(sequence.size, pool.size)
    owner[pool[:dealt]] = sequence[:dealt]
    deficits -= np.bincount(sequence[:dealt], minlength=deficits.size)


def plain_realize(state, partitions, targets, deal):
    """Realization sorting every claim by (holder, locality, k-th of its topic) each time."""
    topic_of, rank, racks, owner = state.topic_of, state.rank, state.racks, state.owner
    claims = state.claimant[partitions]
    claimed = partitions[claims >= 0]
    holders = claims[claims >= 0]
    topics = topic_of[claimed]
    order = np.lexsort((claimed, topics, holders))
    claimed, holders, topics = claimed[order], holders[order], topics[order]
    within_topic = sticky._position_in_run(holders * (int(topic_of[-1]) + 1) + topics)
    remote = (
        ~racks.is_local(claimed, holders) if racks is not None else np.zeros(claimed.size, bool)
    )
    order = np.lexsort((claimed, within_topic, remote, holders))
    claimed, holders = claimed[order], holders[order]
    keep = sticky._position_in_run(holders) < targets[holders]
    owner[claimed[keep]] = holders[keep]
    deficits = targets - np.bincount(holders[keep], minlength=targets.size)
    pool = np.setdiff1d(partitions, claimed[keep], assume_unique=True)
    if racks is not None:
        pool = plain_deal_local(pool, deficits, rank, racks, owner)
    deal(pool, deficits, rank, owner)


@st.composite
def realizations(draw):
    """(state, partitions, targets): a few topics, random valid claimants, maybe racks, and
    targets adding up to the partitions realized (each of them possibly short or over)."""
    num_members = draw(st.integers(1, 8))
    counts = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4))
    topic_of = np.repeat(np.arange(len(counts)), counts).astype(np.int64)
    size = topic_of.size
    claimant = np.asarray(
        draw(st.lists(st.integers(-1, num_members - 1), min_size=size, max_size=size)),
        dtype=np.int64,
    )
    rank = np.asarray(draw(st.permutations(range(num_members))), dtype=np.int64)
    racks = None
    if draw(st.booleans()):
        num_racks = draw(st.integers(1, 3))
        local = np.asarray(
            draw(
                st.lists(
                    st.lists(st.booleans(), min_size=num_racks, max_size=num_racks),
                    min_size=size,
                    max_size=size,
                )
            ),
            dtype=bool,
        )
        member_rack = np.asarray(
            draw(
                st.lists(st.integers(-1, num_racks - 1), min_size=num_members, max_size=num_members)
            ),
            dtype=np.int64,
        )
        racks = sticky._RackMap(local, member_rack)
    # all of them, as the uniform path realizes
    partitions = np.arange(size, dtype=np.int64)
    cuts = sorted(
        draw(
            st.lists(
                st.integers(0, partitions.size), min_size=num_members - 1, max_size=num_members - 1
            )
        )
    )
    targets = np.diff([0, *cuts, partitions.size]).astype(np.int64)
    state = sticky._State(claimant, topic_of, rank, racks, np.full(size, -1, dtype=np.int64))
    return state, partitions, targets


@SETTINGS
@given(realizations())
def test_realize_gives_what_sorting_every_claim_gives(problem):
    state, partitions, targets = problem
    plain_state = sticky._State(
        state.claimant, state.topic_of, state.rank, state.racks, state.owner.copy()
    )
    plain_realize(plain_state, partitions, targets.copy(), plain_deal)
    claim_counts = np.bincount(state.claimant + 1, minlength=targets.size + 1)[1:]
    sticky._realize(state, targets.copy(), claim_counts)
    assert state.owner.tolist() == plain_state.owner.tolist()


@SETTINGS
@given(st.data())
def test_deal_is_the_round_robin_of_every_unit_of_deficit(data):
    num_members = data.draw(st.integers(1, 10))
    deficits = np.asarray(
        data.draw(st.lists(st.integers(-2, 30), min_size=num_members, max_size=num_members)),
        dtype=np.int64,
    )
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    pool = np.arange(data.draw(st.integers(0, 120)), dtype=np.int64)
    plain_owner = np.full(pool.size, -1, dtype=np.int64)
    fast_owner = plain_owner.copy()
    plain_deficits, fast_deficits = deficits.copy(), deficits.copy()
    plain_deal(pool, plain_deficits, rank, plain_owner)
    sticky._deal(pool, fast_deficits, rank, fast_owner)
    assert fast_owner.tolist() == plain_owner.tolist()
    assert fast_deficits.tolist() == plain_deficits.tolist()


@SETTINGS
@given(st.data())
def test_window_by_subsets_is_scorings_optimal_min_and_max_load(data):
    from assignors.traces.scoring import (
        SubscriptionClasses,
        optimal_max_load_of,
        optimal_min_load_of,
    )

    num_members = data.draw(st.integers(1, 9))
    num_classes = data.draw(st.integers(1, 6))
    class_subscribers = [
        np.asarray(sorted(data.draw(st.sets(st.integers(0, num_members - 1), min_size=1))))
        for _ in range(num_classes)
    ]
    sizes = [data.draw(st.integers(0, 40)) for _ in range(num_classes)]
    active = np.unique(np.concatenate(class_subscribers))
    classes = SubscriptionClasses(
        tuple(tuple(members.tolist()) for members in class_subscribers),
        tuple(sizes),
        {},
        tuple(active.tolist()),
    )
    assert sticky._window_by_subsets(class_subscribers, sizes, num_members, active) == (
        optimal_min_load_of(classes),
        optimal_max_load_of(classes),
    )


@st.composite
def topic_realizations(draw):
    """(state, subscribers, holdings, offsets, counts) as the heterogeneous path realizes them:
    valid claims (by subscribers only), maybe racks, and holdings per (topic, subscriber)
    that add up to each topic's size (or, now and then, do not)."""
    num_members = draw(st.integers(1, 7))
    counts = np.asarray(draw(st.lists(st.integers(1, 9), min_size=1, max_size=4)), np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    topic_of = np.repeat(np.arange(counts.size), counts).astype(np.int64)
    subscribers, holdings = [], []
    claimant = np.full(topic_of.size, -1, dtype=np.int64)
    for position, count in enumerate(counts.tolist()):
        members = np.asarray(
            sorted(draw(st.sets(st.integers(0, num_members - 1), max_size=num_members))),
            dtype=np.int64,
        )
        subscribers.append(members)
        if members.size == 0:
            holdings.append(np.zeros(0, dtype=np.int64))
            continue
        for partition in range(count):
            pick = draw(st.integers(-1, members.size - 1))
            if pick >= 0:
                claimant[offsets[position] + partition] = members[pick]
        cuts = sorted(
            draw(
                st.lists(
                    st.integers(0, count), min_size=members.size - 1, max_size=members.size - 1
                )
            )
        )
        held = np.diff([0, *cuts, count]).astype(np.int64)
        if draw(st.integers(0, 9)) == 0:
            held[draw(st.integers(0, held.size - 1))] += draw(st.sampled_from([-1, 1]))
            held = np.maximum(held, 0)
        holdings.append(held)
    rank = np.asarray(draw(st.permutations(range(num_members))), dtype=np.int64)
    racks = None
    if draw(st.booleans()):
        num_racks = draw(st.integers(1, 3))
        local = np.asarray(
            draw(
                st.lists(
                    st.lists(st.booleans(), min_size=num_racks, max_size=num_racks),
                    min_size=topic_of.size,
                    max_size=topic_of.size,
                )
            ),
            dtype=bool,
        )
        member_rack = np.asarray(
            draw(
                st.lists(st.integers(-1, num_racks - 1), min_size=num_members, max_size=num_members)
            ),
            dtype=np.int64,
        )
        racks = sticky._RackMap(local, member_rack)
    state = sticky._State(claimant, topic_of, rank, racks, np.full(topic_of.size, -1, np.int64))
    return state, subscribers, holdings, offsets, counts


@SETTINGS
@given(topic_realizations())
def test_realizing_all_topics_at_once_is_realizing_each_topic(problem):
    state, subscribers, holdings, offsets, counts = problem
    plain_state = sticky._State(
        state.claimant, state.topic_of, state.rank, state.racks, state.owner.copy()
    )
    for position, members in enumerate(subscribers):
        if members.size == 0:
            continue
        targets = np.zeros(state.rank.size, dtype=np.int64)
        targets[members] = holdings[position]
        start, stop = int(offsets[position]), int(offsets[position] + counts[position])
        plain_realize(plain_state, np.arange(start, stop), targets, plain_deal)
    edges = sticky._Edges.of(subscribers, state.rank.size)
    valid = sticky._ClaimEdges.of(edges, state.claimant, state.topic_of)
    sticky._realize_topics(state, edges, valid, holdings, offsets)
    assert state.owner.tolist() == plain_state.owner.tolist()


def _without_shortcut(assignor, group):
    saved = sticky._settled
    sticky._settled = lambda *arguments: False
    try:
        return assignor.assign(group)
    finally:
        sticky._settled = saved


@pytest.mark.parametrize("subscription", ["uniform", "heterogeneous"])
@SETTINGS
@given(data=st.data(), fed_back=st.booleans())
def test_settled_claims_are_what_the_full_path_answers(subscription, data, fed_back):
    group = data.draw(
        groups(
            max_members=10, max_topics=5, max_partitions=12, owned=True, subscription=subscription
        )
    )
    from strategies import next_round

    if fed_back:  # the common case of a replay: last round's answer, membership unchanged
        group = next_round(group, StickyAssignor().assign(group))
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        fast, full = assignor.assign(group), _without_shortcut(assignor, group)
        assert fast.owners.tolist() == full.owners.tolist()
        assert fast.withheld_indexes.tolist() == full.withheld_indexes.tolist()


def plain_rack_map(group):
    """``local`` of the rack map, set partition by partition and replica by replica."""
    space = group.partition_space()
    rack_names = sorted({m.rack for m in group.members if m.rack is not None})
    column = {name: c for c, name in enumerate(rack_names)}
    local = np.zeros((space.size, len(rack_names)), dtype=bool)
    for name, offset in zip(space.topic_names, space.offsets, strict=True):
        topic = group.topic(name)
        if topic is None or topic.replica_racks is None:
            continue
        for partition, replica_racks in enumerate(topic.replica_racks):
            for rack in replica_racks:
                if rack in column:
                    local[offset + partition, column[rack]] = True
    return local


@SETTINGS
@given(groups(racks=True))
def test_rack_map_rows_are_the_replicas_on_each_consumer_rack(group):
    from assignors.arrays import GroupArrays

    space = group.partition_space()
    racks = sticky._RackMap.build(group, space, GroupArrays.of(group).subscriptions)
    if racks is not None:
        assert racks.local.tolist() == plain_rack_map(group).tolist()


@SETTINGS
@given(st.data())
def test_rack_classes_are_the_distinct_rows_in_row_order(data):
    num_racks = data.draw(st.integers(0, 5))
    size = data.draw(st.integers(1, 30))
    local = np.asarray(
        data.draw(
            st.lists(
                st.lists(st.booleans(), min_size=num_racks, max_size=num_racks),
                min_size=size,
                max_size=size,
            )
        ),
        dtype=bool,
    ).reshape(size, num_racks)
    racks = sticky._RackMap(local, np.zeros(0, dtype=np.int64))
    partitions = np.asarray(
        data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=size, unique=True))
    )
    classes, class_of = racks.classes(partitions)
    expected, expected_of = np.unique(local[partitions], axis=0, return_inverse=True)
    assert classes.tolist() == expected.tolist()
    assert class_of.tolist() == expected_of.reshape(-1).tolist()


def plain_deal_local(pool, deficits, rank, racks, owner):
    """Rack-local dealing with the flow's arcs, the classes' shares and each rack's dealing
    built one class and one rack at a time."""
    from ortools.graph.python import max_flow

    num_racks = racks.local.shape[1]
    if pool.size == 0 or num_racks == 0:
        return pool
    member_rack = racks.member_rack
    demand = np.zeros(num_racks, dtype=np.int64)
    needy = (deficits > 0) & (member_rack >= 0)
    np.add.at(demand, member_rack[needy], deficits[needy])
    classes, class_of = np.unique(racks.local[pool], axis=0, return_inverse=True)
    class_of = class_of.reshape(-1)
    class_sizes = np.bincount(class_of, minlength=len(classes))
    useful = [c for c in range(len(classes)) if classes[c].any()]
    if not useful or not demand.any():
        return pool
    flow = max_flow.SimpleMaxFlow()
    rack_node = 2 + len(classes)
    tails, heads, capacities = [], [], []
    for c in useful:
        tails.append(0)
        heads.append(2 + c)
        capacities.append(int(class_sizes[c]))
    class_rack_arcs = []
    for c in useful:
        for r in np.flatnonzero(classes[c]).tolist():
            class_rack_arcs.append((c, r, len(tails)))
            tails.append(2 + c)
            heads.append(rack_node + r)
            capacities.append(int(class_sizes[c]))
    for r in range(num_racks):
        tails.append(rack_node + r)
        heads.append(1)
        capacities.append(int(demand[r]))
    arcs = flow.add_arcs_with_capacity(np.asarray(tails), np.asarray(heads), np.asarray(capacities))
    if flow.solve(0, 1) != flow.OPTIMAL:
        return pool
    flows = flow.flows(arcs)
    taken = np.zeros(pool.size, dtype=bool)
    chosen_by_rack = [[] for _ in range(num_racks)]
    shares_of_class = {}
    for c, r, arc in class_rack_arcs:
        if int(flows[arc]):
            shares_of_class.setdefault(c, []).append((r, int(flows[arc])))
    for c, shares in shares_of_class.items():
        in_class = np.flatnonzero(class_of == c)
        racks_dealt = np.concatenate([np.full(units, r, dtype=np.int64) for r, units in shares])
        spots = np.concatenate(
            [(np.arange(units, dtype=np.float64) + 0.5) / units for _, units in shares]
        )
        racks_dealt = racks_dealt[np.argsort(spots, kind="stable")]
        dealt = in_class[: racks_dealt.size]
        for r, _ in shares:
            chosen_by_rack[r].append(dealt[racks_dealt == r])
    for r in range(num_racks):
        if not chosen_by_rack[r]:
            continue
        chosen = np.sort(np.concatenate(chosen_by_rack[r]))
        rack_deficits = np.where(member_rack == r, deficits, 0)
        before = rack_deficits.copy()
        plain_deal(pool[chosen], rack_deficits, rank, owner)
        deficits -= before - rack_deficits
        taken[chosen] = True
    return pool[~taken]


@SETTINGS
@given(st.data())
def test_rack_local_dealing_matches_dealing_one_class_and_rack_at_a_time(data):
    num_members = data.draw(st.integers(1, 8))
    num_racks = data.draw(st.integers(1, 4))
    size = data.draw(st.integers(1, 40))
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
    racks = sticky._RackMap(local, member_rack)
    pool = np.asarray(sorted(data.draw(st.sets(st.integers(0, size - 1)))), dtype=np.int64)
    deficits = np.asarray(
        data.draw(st.lists(st.integers(-1, 12), min_size=num_members, max_size=num_members)),
        dtype=np.int64,
    )
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    plain_owner, fast_owner = np.full(size, -1), np.full(size, -1)
    plain_deficits, fast_deficits = deficits.copy(), deficits.copy()
    plain_left = plain_deal_local(pool, plain_deficits, rank, racks, plain_owner)
    fast_left = sticky._deal_local(pool, fast_deficits, rank, racks, fast_owner)
    assert fast_left.tolist() == plain_left.tolist()
    assert fast_owner.tolist() == plain_owner.tolist()
    assert fast_deficits.tolist() == plain_deficits.tolist()


def plain_water_fill(loads, units, rank):
    """Water-filling with the level found by binary search over levels."""
    added = np.zeros(loads.size, dtype=np.int64)
    if units <= 0 or loads.size == 0:
        return added
    low, high = int(loads.min()), int(loads.min()) + units
    while low < high:
        middle = (low + high + 1) // 2
        if int(np.maximum(middle - loads, 0).sum()) <= units:
            low = middle
        else:
            high = middle - 1
    added = np.maximum(low - loads, 0)
    remaining = units - int(added.sum())
    if remaining:
        at_level = np.flatnonzero(loads + added == low)
        added[at_level[np.argsort(rank[at_level], kind="stable")[:remaining]]] += 1
    return added


@SETTINGS
@given(
    st.lists(st.integers(0, 30), min_size=0, max_size=sticky._SMALL * 2),
    st.integers(-2, 400),
    st.randoms(use_true_random=False),
)
def test_water_fill_levels_match_a_binary_search_over_levels(loads, units, random):
    rank = list(range(len(loads)))
    random.shuffle(rank)
    loads, rank = np.asarray(loads, dtype=np.int64), np.asarray(rank, dtype=np.int64)
    expected = plain_water_fill(loads, units, rank)
    assert sticky._water_fill(loads, units, rank).tolist() == expected.tolist()


@SETTINGS
@given(topic_claim_moves(12, (0, 40)))
def test_moving_claims_on_lists_moves_what_the_array_steps_move(problem):
    members, holding, placed, loads, rank = problem
    arrays = (holding.copy(), placed.copy(), loads.copy())
    lists = (holding.copy(), placed.copy(), loads.copy())
    moved = sticky._move_topic_claims(members, *arrays, rank)
    assert sticky._move_topic_claims_small(members, *lists, rank) == moved
    assert [a.tolist() for a in lists] == [a.tolist() for a in arrays]


@SETTINGS
@given(load_problems(), st.data())
def test_spreading_free_partitions_on_lists_matches_the_array_sweeps(problem, data):
    subscribers, claims, _, loads, _, _ = problem
    # free partitions: some of each topic's partitions placed beyond the kept claims
    kept = [np.minimum(own, data.draw(st.integers(0, 3))) for own in claims]
    free = [
        np.asarray([data.draw(st.integers(0, 4)) for _ in range(members.size)], dtype=np.int64)
        for members in subscribers
    ]
    loads = np.zeros(loads.size, dtype=np.int64)
    for members, held, placed in zip(subscribers, kept, free, strict=True):
        np.add.at(loads, members, held + placed)
    rank = np.asarray(data.draw(st.permutations(range(loads.size))), dtype=np.int64)
    order = sorted(range(len(subscribers)), key=lambda p: (subscribers[p].size, p))
    arrays = ([f.copy() for f in free], loads.copy())
    sticky._spread_free_arrays(order, subscribers, kept, *arrays, rank)
    lists = ([f.tolist() for f in free], loads.tolist())
    members_of, held_of = [m.tolist() for m in subscribers], [h.tolist() for h in kept]
    sticky._spread_free_lists(order, members_of, held_of, *lists, rank.tolist())
    assert lists[0] == [f.tolist() for f in arrays[0]]
    assert lists[1] == arrays[1].tolist()


@SETTINGS
@given(load_problems(), st.data(), st.booleans())
def test_placing_and_balancing_on_lists_is_the_array_steps(problem, data, placing):
    """From kept claims (often piled on one member, so claims must move): water-filling the
    unplaced partitions then balancing (``placing``), or balancing some free partitions placed
    at random, on lists as on arrays."""
    subscribers, claims, counts, _, _, _ = problem
    kept = [own.copy() for own in claims]
    free = [
        np.asarray(
            [0 if placing else data.draw(st.integers(0, 3)) for _ in range(members.size)],
            dtype=np.int64,
        )
        for members in subscribers
    ]
    num_members = max(int(members.max()) for members in subscribers) + 1
    loads = np.zeros(num_members, dtype=np.int64)
    for members, held, placed in zip(subscribers, kept, free, strict=True):
        np.add.at(loads, members, held + placed)
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    order = sorted(range(len(subscribers)), key=lambda p: (subscribers[p].size, p))
    arrays = ([k.copy() for k in kept], [f.copy() for f in free], loads.copy())
    lists = ([k.copy() for k in kept], [f.copy() for f in free], loads.copy())
    assert sticky._small_topics(subscribers, loads)
    if placing:
        moved = sticky._place_on_arrays(order, subscribers, counts, *arrays, rank)
        assert sticky._place_on_lists(order, subscribers, counts, *lists, rank) == moved
    else:
        moved = sticky._balance_on_arrays(order, subscribers, *arrays, rank)
        assert sticky._balance_by_kafkas_rule(order, subscribers, *lists, rank) == moved
    for on_lists, on_arrays in zip(lists[:2], arrays[:2], strict=True):
        assert [a.dtype for a in on_lists] == [a.dtype for a in on_arrays]
        assert [a.tolist() for a in on_lists] == [a.tolist() for a in on_arrays]
    assert lists[2].tolist() == arrays[2].tolist()


@SETTINGS
@given(st.data())
def test_uniform_targets_give_ceil_quotas_to_the_most_claiming_members_by_rank(data):
    num_members = data.draw(st.integers(1, 12))
    active = np.asarray(
        sorted(data.draw(st.sets(st.integers(0, num_members - 1), min_size=1))), dtype=np.int64
    )
    num_partitions = data.draw(st.integers(0, 60))
    claimant = np.asarray(
        data.draw(
            st.lists(
                st.sampled_from([-1, *active.tolist()]),
                min_size=num_partitions,
                max_size=num_partitions,
            )
        ),
        dtype=np.int64,
    )
    rank = np.asarray(data.draw(st.permutations(range(num_members))), dtype=np.int64)
    claimed = np.bincount(claimant[claimant >= 0], minlength=num_members)
    floor_quota, extra = divmod(num_partitions, active.size)
    plain = np.zeros(num_members, dtype=np.int64)
    plain[active] = floor_quota
    plain[active[np.lexsort((rank[active], -claimed[active]))][:extra]] += 1
    targets = sticky._uniform_targets(num_partitions, active, claimed, rank, num_members)
    assert targets.tolist() == plain.tolist()
