"""Kafka's producer in the replication simulator: retries, delivery timeout, requests in flight,
the idempotent producer and the broker's duplicate and sequence checks, the queue anomaly checks
and the explorer's findings for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktk.cli import app
from replication.checks import History, find_anomalies
from replication.errors import ScenarioError
from replication.explore import explore
from replication.log import LogRecord, ProducerFields, ReplicaLog
from replication.modes import MODE_NAMES, get_mode
from replication.partition import (
    DUPLICATE,
    NONE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PartitionReplica,
)
from replication.producer import DELIVERY_TIMEOUT, ProducerClient, ProducerSettings
from replication.scenario import load_scenario, scenario_to_dict
from replication.sim import run_scenario
from replication.storage import DiskLogStorage

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "examples" / "scenarios"


def scenario(steps: str, config: str = "{brokers: [1, 2], replicas: [1, 2]}") -> str:
    return f"name: t\nconfig: {config}\nsteps:\n{steps}"


def leader(broker_id: int = 1) -> PartitionReplica:
    replica = PartitionReplica(broker_id, (1, 2), get_mode("current"))
    replica.become_leader(leader_epoch=0, partition_epoch=0, isr=(1,), now_ms=0)
    return replica


# ------------------------------------------------------------------ broker side


def test_broker_answers_a_retried_batch_as_duplicate_without_appending() -> None:
    replica = leader()
    fields = ProducerFields(1000, 0, 0)
    assert replica.append_as_leader("m1", acks="1", producer=fields) == (NONE, 0)
    assert replica.append_as_leader("m1", acks="1", producer=fields) == (DUPLICATE, 0)
    assert replica.log.values() == ["m1"]


def test_broker_refuses_a_sequence_gap_and_a_new_epoch_not_starting_at_zero() -> None:
    replica = leader()
    replica.append_as_leader("m1", acks="1", producer=ProducerFields(1000, 0, 0))
    gap = replica.append_as_leader("m3", acks="1", producer=ProducerFields(1000, 0, 2))
    new_epoch = replica.append_as_leader("x", acks="1", producer=ProducerFields(1000, 1, 4))
    assert gap == new_epoch == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert replica.append_as_leader("y", acks="1", producer=ProducerFields(1000, 1, 0))[0] == NONE


def test_broker_accepts_any_sequence_from_a_producer_it_holds_nothing_of() -> None:
    replica = leader()
    assert replica.append_as_leader("m", acks="1", producer=ProducerFields(7, 0, 9)) == (NONE, 0)


def test_only_the_last_five_batches_answer_a_retry_as_duplicate() -> None:
    replica = leader()
    for sequence in range(6):
        replica.append_as_leader(f"m{sequence}", acks="1", producer=ProducerFields(5, 0, sequence))
    assert (
        replica.append_as_leader("m1", acks="1", producer=ProducerFields(5, 0, 1))[0] == DUPLICATE
    )
    # sequence 0 fell out of the five kept: no longer recognised, and out of order
    assert replica.append_as_leader("m0", acks="1", producer=ProducerFields(5, 0, 0))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER
    )


def test_truncation_and_recovery_rebuild_producer_state_from_the_log() -> None:
    log = ReplicaLog()
    for sequence in range(3):
        log.append(0, f"m{sequence}", ProducerFields(9, 0, sequence))
    log.truncate_to(1)
    assert log.producers[9].last_sequence == 0
    log.flush()
    log.append(0, "m1", ProducerFields(9, 0, 1))
    log.recover_after_crash(lose_unflushed=True)
    assert log.producers[9].last_sequence == 0


def test_follower_copies_producer_fields_so_a_new_leader_recognises_a_retry() -> None:
    text = scenario(
        """  - {producer: p1, idempotence: true}
  - {fetch: 2}
  - {cut: {from: 1, to: clients, both: false}}
  - {send: m1}
  - {fetch: 2}
  - {fetch: 2}
  - {shutdown: 1}
  - {advance_ms: 30100}
  - {fetch: 2}
"""
    )
    result = run_scenario(load_scenario(text), "current")
    assert result.final.leader == 2
    assert result.final.replica(2).records[0][3:] == (1000, 0, 0)
    assert result.final.replica(2).values() == ["m1"]
    assert dict(result.final.results)["m1"] == "ok"


def test_records_on_disk_carry_producer_id_epoch_and_sequence(tmp_path: Path) -> None:
    storage = DiskLogStorage(tmp_path / "broker-1")
    log = ReplicaLog(storage=storage)
    log.append(0, "m1", ProducerFields(1000, 0, 0))
    log.append(0, "m2")
    log.flush()
    log.recover_after_crash(lose_unflushed=False)
    assert [record[3:] for record in log.records] == [(1000, 0, 0), (-1, -1, -1)]
    assert log.producers[1000].last_sequence == 0


# ------------------------------------------------------------------ client side


def test_timed_out_batches_go_back_reversed_without_idempotence() -> None:
    client = ProducerClient("p", ProducerSettings(), producer_id=-1)
    for value in ("a1", "a2"):
        client.send(value, 0)
        client.dispatched(client.queue[0], 0)
    for batch in client.timed_out(30_000):
        assert client.answer(batch, "REQUEST_TIMED_OUT", 30_000) == "retry"
    assert [batch.value for batch in client.queue] == ["a2", "a1"]


def test_idempotent_retries_go_in_sequence_order_one_at_a_time() -> None:
    client = ProducerClient("p", ProducerSettings(idempotence=True), producer_id=1000)
    for value in ("b1", "b2"):
        client.send(value, 0)
        client.dispatched(client.queue[0], 0)
    for batch in client.timed_out(30_000):
        client.answer(batch, "REQUEST_TIMED_OUT", 30_000)
    first = client.next_to_send(30_100)
    assert first is not None and (first.value, first.sequence) == ("b1", 0)
    client.dispatched(first, 30_100)
    assert client.next_to_send(30_100) is None  # b2 waits until b1 is answered
    client.answer(first, "ok", 30_200)
    second = client.next_to_send(30_200)
    assert second is not None and second.sequence == 1


def test_out_of_order_sequence_right_after_the_last_ack_is_fatal() -> None:
    client = ProducerClient("p", ProducerSettings(idempotence=True), producer_id=1000)
    client.send("m1", 0)
    first = client.queue[0]
    client.dispatched(first, 0)
    client.answer(first, "ok", 1)
    client.send("m2", 1)
    second = client.queue[0]
    client.dispatched(second, 1)
    assert client.answer(second, OUT_OF_ORDER_SEQUENCE_NUMBER, 2) == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_delivery_timeout_fails_a_batch_that_never_gets_through() -> None:
    text = scenario(
        """  - {producer: p1, delivery_timeout_ms: 40000}
  - {cut: {from: clients, to: 1}}
  - {send: m1}
  - {advance_ms: 45000}
  - expect: {results: {m1: DELIVERY_TIMEOUT}, acked: []}
"""
    )
    result = run_scenario(load_scenario(text), "current")
    assert result.expect_failures == ()
    assert dict(result.final.results)["m1"] == DELIVERY_TIMEOUT


def test_one_request_in_flight_keeps_order_through_a_retry() -> None:
    text = scenario(
        """  - {producer: p1, max_in_flight: 1}
  - {fetch: 2}
  - {cut: {from: clients, to: 1, both: false}}
  - {send: m1}
  - {heal: {from: clients, to: 1, both: false}}
  - {send: m2}
  - {advance_ms: 30100}
  - {fetch: 2}
  - {fetch: 2}
"""
    )
    result = run_scenario(load_scenario(text), "current")
    assert result.final.replica(1).values() == ["m1", "m2"]
    assert result.final.anomalies == ()


def test_acks_0_producer_never_retries_and_is_never_acknowledged() -> None:
    text = scenario("  - {producer: p1, acks: 0}\n  - {send: m1}\n  - {advance_ms: 40000}\n")
    result = run_scenario(load_scenario(text), "current")
    assert dict(result.final.results)["m1"] == "sent"
    assert result.final.acked == ()


# ------------------------------------------------------------------ settings and input


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"idempotence": True, "acks": 1}, "acks"),
        ({"idempotence": True, "max_in_flight": 6}, "max_in_flight"),
        ({"idempotence": True, "retries": 0}, "retries"),
        ({"delivery_timeout_ms": 1000}, "delivery_timeout_ms"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"retries": -1}, "retries"),
        ({"retry_backoff_ms": 500, "retry_backoff_max_ms": 100}, "retry_backoff_max_ms"),
    ],
)
def test_producer_settings_are_checked_as_kafka_checks_them(
    options: dict[str, object], field: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        ProducerSettings(**options)  # type: ignore[arg-type]
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("  - {producer: p1, max_in_flight: 0}\n", "step 0: max_in_flight:"),
        ("  - {producer: p1, idempotence: true, acks: 1}\n", "step 0: acks:"),
        ("  - {producer: p1, linger_ms: 5}\n", "step 0: linger_ms: field not allowed"),
        ("  - {send: m1}\n", "step 0: producer: send needs producer"),
        ("  - {producer: p1}\n  - {send: m1, producer: p2}\n", "step 1: producer: unknown"),
        ("  - {producer: p1}\n  - {producer: p1}\n", "step 1: producer: producer declared"),
        ("  - {producer: p1}\n  - {send: m1}\n  - {send: m1}\n", "step 2: send: each value"),
        ("  - {expect: {anomalies: [Nope]}}\n", "step 0: expect.anomalies:"),
    ],
)
def test_bad_producer_input_names_step_and_field(steps: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario(steps))
    assert message in str(caught.value)


def test_producer_setting_out_of_range_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(scenario("  - {producer: p1, retries: -5}\n"), encoding="utf-8")
    done = CliRunner().invoke(app, ["replicate", str(path)])
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "step 0: retries:" in lines[0], done.stderr
    assert "Traceback" not in done.output


def test_producer_steps_round_trip_through_the_file_format() -> None:
    loaded = load_scenario(scenario("  - {producer: p1, idempotence: true}\n  - {send: m1}\n"))
    assert load_scenario(scenario_to_dict(loaded)) == loaded


# ------------------------------------------------------------------ anomaly checks


def test_anomaly_checks_name_each_queue_anomaly() -> None:
    log = (LogRecord(0, 0, "b"), LogRecord(1, 0, "a"))
    clean = History(log, ("b", "a"), (("p", ("b", "a")),), (("c", ((0, "b"),)),))
    assert find_anomalies(clean) == ()
    reordered = History(log, (), (("p", ("a", "b")),), ())
    assert [f.anomaly for f in find_anomalies(reordered)] == ["ReorderedWrite"]
    truncated = History(log, (), (), (("c", ((0, "x"),)),))
    assert [f.anomaly for f in find_anomalies(truncated)] == ["TruncatedRead"]


# ------------------------------------------------------------------ bundled scenarios


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_retry_after_a_lost_answer_duplicates_unless_idempotent(mode: str) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s16-retry-duplicates.yaml"), mode)
    assert result.expect_failures == ()
    log = result.final.replica(1).values()
    assert log.count("a1") == 2 and log.count("b1") == 1


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_requests_in_flight_reorder_only_without_idempotence(mode: str) -> None:
    result = run_scenario(load_scenario(SCENARIOS / "s17-retries-reorder-in-flight.yaml"), mode)
    assert result.expect_failures == ()
    assert [f.detail.split()[0] for f in result.final.anomalies] == ["p1"]


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_out_of_order_sequence_surfaces_a_lost_acknowledged_write(mode: str) -> None:
    path = SCENARIOS / "s18-out-of-order-sequence-after-loss.yaml"
    result = run_scenario(load_scenario(path), mode)
    assert result.expect_failures == ()
    assert dict(result.final.results)["m3"] == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_consumer_notices_a_truncated_read_only_with_kip_320() -> None:
    path = SCENARIOS / "s19-consumer-read-truncated.yaml"
    detected = {mode: run_scenario(load_scenario(path), mode) for mode in MODE_NAMES}
    assert all(result.expect_failures == () for result in detected.values())
    assert {m: dict(r.final.truncation_detected)["c1"] for m, r in detected.items()} == {
        "pre-0.11": False,
        "kip-101": False,
        "kip-279": False,
        "current": True,
    }


# ------------------------------------------------------------------ explorer


def test_explorer_finds_shrinks_and_replays_duplicates_and_reordering_without_idempotence(
    tmp_path: Path,
) -> None:
    report = explore(
        "current",
        min_insync_replicas=2,
        max_lossy_crashes=0,
        link_cuts=True,
        producer=ProducerSettings(max_in_flight=5),
        schedules=60,
        seed=3,
        out_dir=tmp_path,
    )
    assert {"DuplicateWrite", "ReorderedWrite"} <= set(report.anomaly_counts)
    for name in ("DuplicateWrite", "ReorderedWrite"):
        finding = next(f for f in report.findings if f.violation_class == name)
        assert finding.shrunk_steps < finding.original_steps
        replay = run_scenario(load_scenario(tmp_path / finding.file_name))
        assert replay.expect_failures == ()
        assert name in {found.anomaly for found in replay.final.anomalies}
    document = report.to_json()
    assert (
        document["anomalies"]["ReorderedWrite"]["count"] == report.anomaly_counts["ReorderedWrite"]
    )
    json.dumps(document)


def test_explorer_finds_no_duplicate_or_reordering_with_idempotence() -> None:
    report = explore(
        "current",
        min_insync_replicas=2,
        max_lossy_crashes=0,
        link_cuts=True,
        producer=ProducerSettings(idempotence=True),
        schedules=300,
        seed=3,
    )
    assert report.anomaly_counts == {} and report.class_counts == {}
    assert "no duplicate, reordering or truncated read found" in report.summary()


def test_explorer_finds_and_replays_a_truncated_read_with_acks_1() -> None:
    report = explore(
        "current",
        brokers=(1, 2),
        producer=ProducerSettings(acks=1, max_in_flight=1),
        schedules=400,
        seed=0,
        stop_when_found=("TruncatedRead",),
    )
    finding = next(f for f in report.findings if f.violation_class == "TruncatedRead")
    replay = run_scenario(load_scenario(scenario_to_dict(finding.scenario)))
    assert replay.expect_failures == ()
    assert "TruncatedRead" in {found.anomaly for found in replay.final.anomalies}


def test_explore_command_refuses_idempotence_with_acks_1() -> None:
    done = CliRunner().invoke(app, ["replicate", "explore", "--idempotence", "--acks", "1"])
    assert done.exit_code == 2
    assert "acks: the idempotent producer needs acks=all" in done.stderr


def test_replicate_prints_each_queue_anomaly_found() -> None:
    done = CliRunner().invoke(app, ["replicate", str(SCENARIOS / "s16-retry-duplicates.yaml")])
    assert done.exit_code == 0, done.output
    assert "anomaly DuplicateWrite: a1 is at offsets 0 and 3" in done.stdout


def test_records_on_brokers_that_are_down_are_not_truncated_reads() -> None:
    # broker 3 (never fetched) runs; the two that hold m1 are down: m1 is not gone
    text = scenario(
        """  - {shutdown: 3}
  - {produce: m1, acks: all}
  - {fetch: 2}
  - {fetch: 2}
  - {consume: c1}
  - {crash: 1}
  - {crash: 2}
  - {restart: 3}
  - expect: {consumed: {c1: [m1]}, anomalies: []}
""",
        "{brokers: [1, 2, 3], replicas: [1, 2, 3]}",
    )
    assert run_scenario(load_scenario(text), "current").expect_failures == ()


@pytest.mark.slow
def test_ten_thousand_schedules_with_idempotence_and_link_cuts_show_nothing() -> None:
    # current, min ISR 2, acks=all, idempotence on, unclean off, link cuts, no lossy crash
    report = explore(
        "current",
        min_insync_replicas=2,
        max_lossy_crashes=0,
        link_cuts=True,
        producer=ProducerSettings(idempotence=True),
        schedules=10_000,
        seed=0,
    )
    assert report.schedules == 10_000
    assert report.class_counts == {} and report.anomaly_counts == {}


def test_answered_producer_requests_do_not_pile_up_over_many_retries() -> None:
    from replication.sim import Runner, effective_mode

    text = scenario(
        """  - {producer: p1, request_timeout_ms: 10, delivery_timeout_ms: 300000}
  - {send: m1}
  - {advance_ms: 300000}
""",
        # the follower never fetches and never leaves the ISR: no attempt is ever committed
        "{brokers: [1, 2], replicas: [1, 2], replica_lag_time_max_ms: 1000000}",
    )
    loaded = load_scenario(text)
    runner = Runner(loaded.config, effective_mode(loaded.config))
    for step in loaded.steps:
        runner.step(step)
    cluster = runner.cluster
    assert dict(cluster.state().results)["m1"] == DELIVERY_TIMEOUT
    attempts = len(cluster.brokers[1].replica.log.records)
    assert attempts > 250  # every attempt appended m1 again
    assert len(cluster.produces) < 130
