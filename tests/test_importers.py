"""Importers: kafka-dump-log, GroupMetadataMessageFormatter and coordinator logs -> trace rows."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.errors import InputError
from assignors.model import TopicPartition
from assignors.protocol.wire import (
    MemberAssignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from assignors.traces.files import read_traces, write_traces_jsonl
from assignors.traces.importers import (
    ImportOptions,
    TopicCatalog,
    TopicInfo,
    import_coordinator_log,
    import_dump_log,
    import_formatter,
    import_history,
    parse_topics_file,
)
from assignors.traces.importers.formatter import iter_json_objects

FIXTURES = EXAMPLES / "importers"
M1 = "consumer-payments-1-6c1b2f0e-3f7a-4d51-9a53-2a1f0c9e7d11"
M2 = "consumer-payments-1-0b9e4c77-5d02-4e8b-b6a4-71d3f2c8a905"
M3 = "consumer-payments-1-e2a7d9c3-81f4-4b6e-a0d5-4c9b8e1f2a37"
K1, K2 = "Xv1HKc7pTGmjQ2Y4tZyDbA", "p0Ld9sWcQ9e3n8KfR5uJ7w"


def fixture(name: str) -> tuple[str, str]:
    path = FIXTURES / name
    return name, path.read_text(encoding="utf-8")


def catalog() -> TopicCatalog:
    name, text = fixture("topics.json")
    return parse_topics_file(text, name)


def by_trace(rows: tuple[dict[str, Any], ...]) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        traces.setdefault(row["trace_id"], []).append(row)
    return traces


def members(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {member["member_id"]: member for member in row["members"]}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def dump_line(key: dict[str, Any], payload: dict[str, Any] | None, offset: int = 0) -> str:
    shown = "<DELETE>" if payload is None else json.dumps(payload, separators=(",", ":"))
    return (
        f"| offset: {offset} CreateTime: 1762000000000 keySize: 10 valueSize: 10 "
        f"sequence: -1 headerKeys: [] key: {json.dumps(key, separators=(',', ':'))} "
        f"payload: {shown}"
    )


def classic_value(
    generation: int, group_members: list[dict[str, Any]], protocol: str = "range"
) -> dict[str, Any]:
    return {
        "version": "3",
        "data": {
            "protocolType": "consumer",
            "generation": generation,
            "protocol": protocol,
            "leader": "a",
            "currentStateTimestamp": -1,
            "members": group_members,
        },
    }


def classic_member(member_id: str, partitions: list[int], topic: str = "t") -> dict[str, Any]:
    return {
        "memberId": member_id,
        "groupInstanceId": None,
        "clientId": "c",
        "clientHost": "h",
        "rebalanceTimeout": 1,
        "sessionTimeout": 1,
        "subscription": {"topics": [topic], "userData": None},
        "assignment": {
            "assignedPartitions": [{"topic": topic, "partitions": partitions}],
            "userData": None,
        },
    }


GROUP_KEY = {"type": "2", "data": {"group": "g"}}


# ---------------------------------------------------------------------------------------------
# kafka-dump-log


def test_dump_log_example_gives_one_trace_per_group_and_incarnation() -> None:
    result = import_dump_log([fixture("dump-log.txt")])
    traces = by_trace(result.rows)
    assert list(traces) == ["orders-848", "payments", "reports", "reports#2"]
    assert [row["generation"] for row in traces["payments"]] == [1, 2, 3, 4]
    assert [row["generation"] for row in traces["reports#2"]] == [1]


def test_dump_log_classic_generation_carries_members_racks_and_assignments() -> None:
    payments = by_trace(import_dump_log([fixture("dump-log.txt")]).rows)["payments"]
    second = payments[1]
    assert second["protocol"] == "cooperative-sticky"
    assert second["timestamp_ms"] == 1767607320000
    assert second["topics"] == [
        {"name": "payments", "partitions": 6},
        {"name": "refunds", "partitions": 2},
    ]
    by_id = members(second)
    assert by_id[M1]["instance_id"] == "pod-1"
    assert by_id[M1]["rack"] == "eu-west-1a"
    assert by_id[M3]["instance_id"] is None
    assert by_id[M1]["assigned"] == [["payments", 0], ["payments", 1], ["refunds", 0]]
    # the cooperative round withholds payments-2 and payments-5 for one generation
    assert by_id[M3]["assigned"] == []
    assert set(members(payments[2])[M3]["topics"]) == {"payments", "refunds"}
    assert members(payments[2])[M3]["assigned"] == [["payments", 2], ["payments", 5]]
    assert set(members(payments[3])) == {M1, M3}


def test_dump_log_kip848_maps_topic_ids_and_emits_one_generation_per_target_epoch() -> None:
    rows = by_trace(import_dump_log([fixture("dump-log.txt")]).rows)["orders-848"]
    assert [row["generation"] for row in rows] == [1, 2, 3]
    assert all(row["protocol"] == "uniform" for row in rows)
    assert rows[0]["topics"] == [
        {"name": "audit", "partitions": 1},
        {"name": "orders", "partitions": 4},
    ]
    assert members(rows[1])[K1]["assigned"] == [["audit", 0], ["orders", 0], ["orders", 1]]
    assert members(rows[1])[K2]["assigned"] == [["orders", 2], ["orders", 3]]
    assert "2 of 2 members reached it" in rows[1]["reason"]
    assert list(members(rows[2])) == [K2]
    assert members(rows[2])[K2]["assigned"] == [
        ["audit", 0],
        ["orders", 0],
        ["orders", 1],
        ["orders", 2],
        ["orders", 3],
    ]


def test_dump_log_skips_unknown_types_and_other_protocols_with_reasons() -> None:
    result = import_dump_log([fixture("dump-log.txt")])
    skipped = {note.line: note.reason for note in result.skipped}
    assert "Unknown record type 17" in skipped[19]
    assert "protocol type 'connect'" in skipped[6]
    assert "deleted (tombstone)" in skipped[52]


def test_json_record_of_a_type_that_is_not_a_consumer_group_is_skipped() -> None:
    line = dump_line({"type": "9", "data": {"groupId": "share"}}, {"version": "0", "data": {}})
    result = import_dump_log([("d.txt", line)])
    assert result.rows == ()
    assert result.skipped[0].reason.startswith("record type 9 skipped: it carries nothing")


def test_tombstone_ends_the_trace_and_the_recreated_group_starts_another() -> None:
    lines = [
        dump_line(GROUP_KEY, classic_value(3, [classic_member("a", [0])])),
        dump_line(GROUP_KEY, None),
        dump_line(GROUP_KEY, classic_value(1, [classic_member("b", [0])])),
    ]
    traces = by_trace(import_dump_log([("d.txt", "\n".join(lines))]).rows)
    assert [(trace, [row["generation"] for row in rows]) for trace, rows in traces.items()] == [
        ("g", [3]),
        ("g#2", [1]),
    ]


def test_same_generation_recorded_twice_keeps_the_later_snapshot() -> None:
    lines = [
        dump_line(GROUP_KEY, classic_value(3, [classic_member("a", [0])])),
        dump_line(GROUP_KEY, classic_value(3, [classic_member("b", [0])])),
    ]
    result = import_dump_log([("d.txt", "\n".join(lines))])
    assert [list(members(row)) for row in result.rows] == [["b"]]
    assert "recorded again" in result.skipped[0].reason


def test_member_listed_twice_in_one_generation_is_an_error() -> None:
    value = classic_value(1, [classic_member("a", [0]), classic_member("a", [1])])
    with pytest.raises(InputError, match="member id appears twice") as caught:
        import_dump_log([("d.txt", dump_line(GROUP_KEY, value))])
    assert (caught.value.line, caught.value.value) == (1, "a")


def test_inferred_partition_count_is_the_smallest_consistent_and_never_shrinks() -> None:
    lines = [
        dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [0, 1, 2, 3])])),
        dump_line(GROUP_KEY, classic_value(2, [classic_member("a", [0, 1])])),
        dump_line(GROUP_KEY, classic_value(3, [classic_member("a", [5])])),
    ]
    rows = import_dump_log([("d.txt", "\n".join(lines))]).rows
    assert [row["topics"][0]["partitions"] for row in rows] == [4, 4, 6]


def test_topics_file_counts_win_over_inference() -> None:
    line = dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [0])]))
    side = TopicCatalog({"t": TopicInfo("t", 12)}, source="topics.json")
    assert import_dump_log([("d.txt", line)], side).rows[0]["topics"] == [
        {"name": "t", "partitions": 12}
    ]


def test_topics_file_smaller_than_an_assignment_is_an_error_naming_both() -> None:
    line = dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [7])]))
    side = TopicCatalog({"t": TopicInfo("t", 4)}, source="topics.json")
    with pytest.raises(InputError) as caught:
        import_dump_log([("d.txt", line)], side)
    assert caught.value.source == "topics.json"
    assert "d.txt:1 assigns partition 7" in str(caught.value)


def test_base64_left_by_dump_log_is_decoded_with_the_wire_codecs() -> None:
    member = classic_member("a", [])
    member["subscription"] = b64(encode_subscription(Subscription(("t",), rack_id="r")))
    member["assignment"] = b64(encode_assignment(MemberAssignment((TopicPartition("t", 2),))))
    row = import_dump_log([("d.txt", dump_line(GROUP_KEY, classic_value(1, [member])))]).rows[0]
    assert row["members"][0]["rack"] == "r"
    assert row["members"][0]["assigned"] == [["t", 2]]


def test_empty_assignment_bytes_mean_no_recorded_assignment() -> None:
    member = classic_member("a", [])
    member["assignment"] = ""
    row = import_dump_log([("d.txt", dump_line(GROUP_KEY, classic_value(1, [member])))]).rows[0]
    assert "assigned" not in row["members"][0]


def test_undecodable_subscription_bytes_name_file_line_and_member() -> None:
    member = classic_member("a", [])
    member["subscription"] = "AAE="  # a version and nothing else
    lines = ["Dumping x.log", dump_line(GROUP_KEY, classic_value(1, [member]))]
    with pytest.raises(InputError) as caught:
        import_dump_log([("d.txt", "\n".join(lines))])
    assert (caught.value.source, caught.value.line) == ("d.txt", 2)
    assert caught.value.field == "value.members[0].subscription"
    assert "byte offset 2" in str(caught.value)


def test_malformed_payload_json_names_file_and_line() -> None:
    lines = [
        "Dumping x.log",
        "Log starting offset: 0",
        '| offset: 0 CreateTime: 1 keySize: 1 valueSize: 1 key: {"type":"2","data":'
        '{"group":"g"}} payload: {"version":"3","data":{"protocolType":',
    ]
    with pytest.raises(InputError) as caught:
        import_dump_log([("d.txt", "\n".join(lines))])
    assert str(caught.value).startswith("d.txt:3: payload: payload is not valid JSON")


def test_key_without_payload_is_malformed() -> None:
    text = '| offset: 0 CreateTime: 1 key: {"type":"2","data":{"group":"g"}}'
    with pytest.raises(InputError, match="expected ' payload: '"):
        import_dump_log([("d.txt", text)])


def test_text_format_of_older_dump_log_gives_members_and_assignments() -> None:
    member = "consumer-my-group-1-75802c25-7e83-44cb-8249-a7d2e3197e32"
    prefix = (
        "| offset: {} CreateTime: 16645311{:05d} keySize: 12 valueSize: 257 sequence: -1 "
        "headerKeys: [] key: "
    )
    text = "\n".join(
        [
            "Starting offset: 0",
            prefix.format(0, 16553) + 'group_metadata::group=my-group payload: {"protocolType":'
            '"consumer","protocol":"range","generationId":1,"assignment":"{'
            + member
            + '=[wc-input-0]}"}',
            prefix.format(1, 17354) + "offset_commit::group=my-group,partition=wc-input-0 "
            "payload: offset=12",
            prefix.format(2, 18000) + 'group_metadata::group=my-group payload: {"protocolType":'
            '"consumer","protocol":"range","generationId":2,"assignment":"{'
            + member
            + '=[wc-input-0, wc-input-2],b=[wc-input-1]:0001ff}"}',
            prefix.format(3, 19000) + "group_metadata::group=my-group payload: <DELETE>",
        ]
    )
    result = import_dump_log([("d.txt", text)])
    assert [(row["generation"], row["timestamp_ms"]) for row in result.rows] == [
        (1, 1664531116553),
        (2, 1664531118000),
    ]
    assert members(result.rows[1]) == {
        member: {
            "member_id": member,
            "instance_id": None,
            "rack": None,
            "topics": ["wc-input"],
            "assigned": [["wc-input", 0], ["wc-input", 2]],
        },
        "b": {
            "member_id": "b",
            "instance_id": None,
            "rack": None,
            "topics": ["wc-input"],
            "assigned": [["wc-input", 1]],
        },
    }
    assert result.rows[1]["topics"] == [{"name": "wc-input", "partitions": 3}]
    assert [note.line for note in result.skipped] == [2, 5]
    assert "before 3.8" in result.skipped[0].reason


def kip848(kind: int, member: str | None, value: dict[str, Any] | None, offset: int) -> str:
    key: dict[str, Any] = {"groupId": "c"}
    if member is not None:
        key["memberId"] = member
    payload = None if value is None else {"version": "0", "data": value}
    return dump_line({"type": str(kind), "data": key}, payload, offset)


def kip848_epoch(topic_id: str, subscription: dict[str, Any]) -> list[str]:
    return [
        kip848(
            5,
            "m",
            {
                "instanceId": "pod-0",
                "rackId": "a",
                "clientId": "c",
                "clientHost": "h",
                "rebalanceTimeoutMs": 1,
                "serverAssignor": None,
                **subscription,
            },
            0,
        ),
        kip848(3, None, {"epoch": 1}, 1),
        kip848(7, "m", {"topicPartitions": [{"topicId": topic_id, "partitions": [0, 2]}]}, 2),
        kip848(6, None, {"assignmentEpoch": 1}, 3),
    ]


def test_kip848_topic_id_without_metadata_record_is_an_error_naming_it() -> None:
    lines = kip848_epoch("Z1", {"subscribedTopicNames": ["orders"]})
    with pytest.raises(InputError) as caught:
        import_dump_log([("d.txt", "\n".join(lines))])
    assert (caught.value.line, caught.value.field, caught.value.value) == (3, "topicId", "Z1")


def test_kip848_topic_id_is_named_by_the_topics_file() -> None:
    lines = kip848_epoch("Z1", {"subscribedTopicNames": ["orders"]})
    side = TopicCatalog({"orders": TopicInfo("orders", 3, topic_id="Z1")})
    row = import_dump_log([("d.txt", "\n".join(lines))], side).rows[0]
    assert row["members"] == [
        {
            "member_id": "m",
            "instance_id": "pod-0",
            "rack": "a",
            "topics": ["orders"],
            "assigned": [["orders", 0], ["orders", 2]],
        }
    ]
    assert row["topics"] == [{"name": "orders", "partitions": 3}]


def test_kip848_assignment_timestamp_dates_the_generation() -> None:
    lines = kip848_epoch("Z1", {"subscribedTopicNames": ["orders"]})
    lines[-1] = kip848(6, None, {"assignmentEpoch": 1, "assignmentTimestamp": 1762000000123}, 3)
    side = TopicCatalog({"orders": TopicInfo("orders", 3, topic_id="Z1")})
    row = import_dump_log([("d.txt", "\n".join(lines))], side).rows[0]
    assert row["timestamp_ms"] == 1762000000123


def test_kip848_regex_subscription_covers_the_known_topics_it_matches() -> None:
    lines = [
        kip848(
            4,
            None,
            {
                "topics": [
                    {
                        "topicId": "Z1",
                        "topicName": "orders-eu",
                        "numPartitions": 3,
                        "partitionMetadata": [],
                    },
                    {
                        "topicId": "Z2",
                        "topicName": "audit",
                        "numPartitions": 1,
                        "partitionMetadata": [],
                    },
                ]
            },
            0,
        ),
        *kip848_epoch("Z1", {"subscribedTopicNames": [], "subscribedTopicRegex": "orders-.*"}),
    ]
    row = import_dump_log([("d.txt", "\n".join(lines))]).rows[0]
    assert row["members"][0]["topics"] == ["orders-eu"]


def test_kip848_group_tombstone_ends_the_trace() -> None:
    lines = [
        *kip848_epoch("Z1", {"subscribedTopicNames": ["t"]}),
        kip848(5, "m", None, 4),
        kip848(3, None, None, 5),
        *kip848_epoch("Z1", {"subscribedTopicNames": ["t"]}),
    ]
    side = TopicCatalog({"t": TopicInfo("t", 3, topic_id="Z1")})
    rows = import_dump_log([("d.txt", "\n".join(lines))], side).rows
    assert [row["trace_id"] for row in rows] == ["c", "c#2"]


# ---------------------------------------------------------------------------------------------
# GroupMetadataMessageFormatter


def test_formatter_and_dump_log_agree_on_classic_groups() -> None:
    from_formatter = import_formatter([fixture("formatter.json")]).rows
    from_dump = [
        row
        for row in import_dump_log([fixture("dump-log.txt")]).rows
        if row["trace_id"] != "orders-848"
    ]
    assert list(from_formatter) == from_dump


def test_formatter_skips_records_it_could_not_decode() -> None:
    text = (
        '{"key":{"version":17,"data":"unknown"},"value":{"version":0,"data":"unknown"}}'
        '{"key":{"version":2,"data":{"group":"g"}},"value":null}'
    )
    result = import_formatter([("f.json", text)])
    assert result.rows == ()
    assert "formatter could not decode it" in result.skipped[0].reason


def test_formatter_reads_concatenated_objects_across_lines() -> None:
    assert [line for line, _ in iter_json_objects('{"a":1}\n\n{"b":\n2}{"c":3}', "f")] == [1, 3, 4]


def test_formatter_malformed_object_names_its_line() -> None:
    text = '{"key":{"type":2,"data":{"group":"g"}},"value":null}\n{"key":\n{"type":2,,}}'
    with pytest.raises(InputError) as caught:
        import_formatter([("f.json", text)])
    assert (caught.value.source, caught.value.line) == ("f.json", 3)


def test_formatter_value_without_data_is_malformed() -> None:
    text = '{"key":{"type":2,"data":{"group":"g"}},"value":{"version":3}}'
    with pytest.raises(InputError, match=r"f\.json:1: value"):
        import_formatter([("f.json", text)])


# ---------------------------------------------------------------------------------------------
# coordinator logs


def test_scala_coordinator_log_gives_membership_timing_and_reasons() -> None:
    rows = by_trace(import_coordinator_log([fixture("coordinator-classic.log")], catalog()).rows)
    payments = rows["payments"]
    assert [row["generation"] for row in payments] == [1, 2, 3, 4]
    assert [
        sorted(member["instance_id"] or "-" for member in row["members"]) for row in payments
    ] == [["pod-1", "pod-2"], ["-", "pod-1", "pod-2"], ["-", "pod-1", "pod-2"], ["-", "pod-1"]]
    assert payments[0]["timestamp_ms"] == 1767607203015
    assert "rebalance took 3000 ms" in payments[0]["reason"]
    assert payments[3]["reason"].startswith(f"removing member {M2} on heartbeat expiration")
    assert payments[0]["topics"] == [
        {"name": "payments", "partitions": 6},
        {"name": "refunds", "partitions": 2},
    ]
    assert [(row["generation"], len(row["members"])) for row in rows["reports"]] == [
        (1, 1),
        (2, 2),
        (3, 0),
    ]


def test_new_coordinator_log_follows_kip848_joins_leaves_fencing_and_static_replacement() -> None:
    rows = by_trace(import_coordinator_log([fixture("coordinator-kip848.log")], catalog()).rows)
    orders = rows["orders-848"]
    assert [row["generation"] for row in orders] == [1, 2, 3, 4, 5]
    assert all(row["protocol"] == "uniform" for row in orders)
    assert [len(row["members"]) for row in orders] == [1, 2, 3, 2, 1]
    last = orders[-1]["members"][0]
    assert (last["member_id"], last["instance_id"], last["topics"]) == (
        "Ra7Jd0pXS6uEw1yF4gK2mQ",
        "pod-9",
        ["orders"],
    )
    assert orders[0]["reason"].startswith("assignor took 2 ms")
    assert [(row["generation"], len(row["members"])) for row in rows["billing"]] == [(1, 1), (2, 0)]


def test_logs_of_several_brokers_merge_by_time() -> None:
    first = (
        "a.log",
        "[2026-01-05 10:00:05,000] INFO [GroupCoordinator 2]: Stabilized group g "
        "generation 2 (__consumer_offsets-1) with 0 members "
        "(kafka.coordinator.group.GroupCoordinator)",
    )
    second = (
        "b.log",
        "[2026-01-05 10:00:01,000] INFO [GroupCoordinator 1]: Stabilized group g "
        "generation 1 (__consumer_offsets-1) with 0 members "
        "(kafka.coordinator.group.GroupCoordinator)",
    )
    rows = import_coordinator_log([first, second], TopicCatalog({"t": TopicInfo("t", 1)})).rows
    assert [row["generation"] for row in rows] == [1, 2]


def test_member_count_the_log_cannot_account_for_is_noted() -> None:
    text = (
        "[2026-01-05 10:00:05,000] INFO [GroupCoordinator 2]: Stabilized group g "
        "generation 9 (__consumer_offsets-1) with 3 members "
        "(kafka.coordinator.group.GroupCoordinator)"
    )
    row = import_coordinator_log([("a.log", text)], TopicCatalog({"t": TopicInfo("t", 1)})).rows[0]
    assert "the coordinator counted 3 members, the log names 0" in row["reason"]


def test_coordinator_line_breaking_the_template_names_file_and_line() -> None:
    text = (
        "[2026-01-05 10:00:00,000] INFO [Log partition=t-0] Rolled (kafka.log.LocalLog)\n"
        "[2026-01-05 10:00:05,000] INFO [GroupCoordinator 2]: Stabilized group g generation "
        "two with 3 members (kafka.coordinator.group.GroupCoordinator)"
    )
    with pytest.raises(InputError) as caught:
        import_coordinator_log([("a.log", text)], TopicCatalog({"t": TopicInfo("t", 1)}))
    assert (caught.value.source, caught.value.line) == ("a.log", 2)


def kip848_line(message: str, second: int) -> str:
    return (
        f"[2026-01-05 10:00:{second:02d},000] INFO [GroupCoordinator id=1 "
        f"topic=__consumer_offsets partition=3] [GroupId c] {message} "
        "(org.apache.kafka.coordinator.group.GroupMetadataManager)"
    )


def test_debug_target_assignment_line_gives_members_and_assignments() -> None:
    text = "\n".join(
        [
            kip848_line("Member m1 joins the consumer group using the consumer protocol.", 1),
            kip848_line(
                "Computed a new target assignment for epoch 7 with 'range' assignor in 3ms: "
                "{m1=MemberAssignment(partitions={Z1=[0, 2]}), "
                "m2=MemberAssignment(partitions={Z1=[1]})}.",
                2,
            ),
        ]
    )
    side = TopicCatalog({"orders": TopicInfo("orders", 3, topic_id="Z1")})
    row = import_coordinator_log([("b.log", text)], side).rows[0]
    assert (row["generation"], row["protocol"]) == (7, "range")
    assert {member["member_id"]: member["assigned"] for member in row["members"]} == {
        "m1": [["orders", 0], ["orders", 2]],
        "m2": [["orders", 1]],
    }


def test_target_assignment_with_unmapped_topic_ids_keeps_membership_only() -> None:
    text = kip848_line(
        "Computed a new target assignment for epoch 2 with 'uniform' assignor in "
        "1ms: {m1=MemberAssignment(partitions={Z9=[0]})}.",
        1,
    )
    result = import_coordinator_log([("b.log", text)], TopicCatalog({"t": TopicInfo("t", 1)}))
    assert [member["member_id"] for member in result.rows[0]["members"]] == ["m1"]
    assert "assigned" not in result.rows[0]["members"][0]
    assert "Z9" in result.skipped[0].reason


def test_older_target_assignment_template_without_assignor_is_read() -> None:
    text = "\n".join(
        [
            kip848_line("Member m1 joins the consumer group.", 1),
            kip848_line("Computed a new target assignment for epoch 3: {}.", 2),
        ]
    )
    row = import_coordinator_log([("b.log", text)], TopicCatalog({"t": TopicInfo("t", 1)})).rows[0]
    assert (row["generation"], "protocol" in row, row["members"]) == (3, False, [])


def test_classic_message_behind_a_group_id_prefix_is_still_read() -> None:
    text = kip848_line("Stabilized group c generation 4 with 0 members.", 1)
    row = import_coordinator_log([("b.log", text)], TopicCatalog({"t": TopicInfo("t", 1)})).rows[0]
    assert (row["trace_id"], row["generation"]) == ("c", 4)


def test_coordinator_log_needs_a_topics_file() -> None:
    with pytest.raises(InputError, match="give a topics file"):
        import_history("coordinator-log", [fixture("coordinator-classic.log")])


# ---------------------------------------------------------------------------------------------
# group filter and lenient reading


LENIENT = ImportOptions(strict=False)


def test_group_filter_ignores_other_groups_even_when_they_are_malformed() -> None:
    bad = dump_line({"type": "2", "data": {"group": "other"}}, {"version": "3", "data": {}})
    text = "\n".join([bad, dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [0])]))])
    result = import_dump_log([("d.txt", text)], None, ImportOptions(frozenset({"g"})))
    assert [row["trace_id"] for row in result.rows] == ["g"]


def test_lenient_dump_log_skips_bad_lines_and_records_with_located_notes() -> None:
    member = classic_member("a", [])
    member["subscription"] = "AAE="
    text = "\n".join(
        [
            '| offset: 0 CreateTime: 1 key: {"type":"2","data":{"group":"g"}} payload: {"vers',
            dump_line(GROUP_KEY, classic_value(1, [member])),
            dump_line(GROUP_KEY, classic_value(2, [classic_member("a", [0])])),
        ]
    )
    with pytest.raises(InputError):
        import_dump_log([("d.txt", text)])
    result = import_dump_log([("d.txt", text)], None, LENIENT)
    assert [row["generation"] for row in result.rows] == [2]
    assert [(note.line, note.reason.split(":")[0]) for note in result.skipped] == [
        (1, "line skipped"),
        (2, "record skipped"),
    ]


def test_lenient_formatter_resumes_at_the_next_record() -> None:
    good = json.dumps(
        {
            "key": {"type": 2, "data": {"group": "g"}},
            "value": classic_value(4, [classic_member("a", [1])]),
        }
    )
    text = '{"key":{"type":2,"data":{"group":"g"}},"value":{"version":3,"da' + good
    result = import_formatter([("f.json", text)], None, LENIENT)
    assert [row["generation"] for row in result.rows] == [4]
    assert result.skipped[0].reason.startswith("text skipped: f.json:1: record: not valid JSON")


def test_lenient_coordinator_log_skips_lines_breaking_the_template() -> None:
    text = "\n".join(
        [
            "[2026-01-05 10:00:05,000] INFO [GroupCoordinator 2]: Stabilized group g generation "
            "two with 3 members (kafka.coordinator.group.GroupCoordinator)",
            "[2026-01-05 10:00:06,000] INFO [GroupCoordinator 2]: Stabilized group g generation "
            "3 with 0 members (kafka.coordinator.group.GroupCoordinator)",
        ]
    )
    result = import_coordinator_log(
        [("a.log", text)], TopicCatalog({"t": TopicInfo("t", 1)}), LENIENT
    )
    assert [row["generation"] for row in result.rows] == [3]
    assert result.skipped[0].line == 1


# ---------------------------------------------------------------------------------------------
# topics file, validity, examples


def test_topics_file_forms_and_errors() -> None:
    side = catalog()
    assert side.topics["orders"] == TopicInfo("orders", 4, "Yc5kGZ3oRcqS2tQnq1R0sg")
    assert side.subscription_of("reports") == ("reports-input",)
    assert side.subscription_of("unknown") == (
        "audit",
        "orders",
        "payments",
        "refunds",
        "reports-input",
    )
    with pytest.raises(InputError, match=r"t\.json: orders: unknown key"):
        parse_topics_file('{"orders": {"partitions": 1, "replicas": 3}}', "t.json")
    with pytest.raises(InputError, match=r"t\.json:1: topics file: not valid JSON"):
        parse_topics_file("{", "t.json")


@pytest.mark.parametrize(
    "kind, names",
    [
        ("dump-log", ["dump-log.txt"]),
        ("formatter", ["formatter.json"]),
        ("coordinator-log", ["coordinator-classic.log", "coordinator-kip848.log"]),
    ],
)
def test_imported_examples_pass_the_trace_reader(
    kind: str, names: list[str], tmp_path: Path
) -> None:
    side = catalog() if kind == "coordinator-log" else None
    result = import_history(kind, [fixture(name) for name in names], side)
    write_traces_jsonl(result.rows, tmp_path / "traces.jsonl")
    traces, failures = read_traces([tmp_path])
    assert failures == []
    assert [trace.trace_id for trace in traces] == sorted(result.trace_ids())
    assert sum(len(trace.generations) for trace in traces) == len(result.rows)


def test_import_is_deterministic() -> None:
    first = import_history("dump-log", [fixture("dump-log.txt")])
    second = import_history("dump-log", [fixture("dump-log.txt")])
    assert json.dumps(first.rows) == json.dumps(second.rows)


def test_example_files_are_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("importer_examples", FIXTURES / "generate.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    segment, dump, formatter = generator.render()
    assert (FIXTURES / generator.SEGMENT).read_bytes() == segment
    assert (FIXTURES / "dump-log.txt").read_text(encoding="utf-8") == dump
    assert (FIXTURES / "formatter.json").read_text(encoding="utf-8") == formatter


# ---------------------------------------------------------------------------------------------
# property: any classic history survives both renderings


@st.composite
def classic_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    counts = {f"t{index}": draw(st.integers(1, 5)) for index in range(draw(st.integers(1, 3)))}
    generation = 0
    history = []
    for _ in range(draw(st.integers(1, 4))):
        generation += draw(st.integers(1, 3))
        ids = draw(st.lists(st.sampled_from(["m0", "m1", "m2", "m3"]), unique=True, max_size=4))
        free = [TopicPartition(topic, p) for topic, count in counts.items() for p in range(count)]
        group_members = []
        for member_id in ids:
            topics = tuple(sorted(draw(st.sets(st.sampled_from(sorted(counts)), min_size=1))))
            wanted = [tp for tp in free if tp.topic in topics]
            assigned = draw(
                st.lists(st.sampled_from(wanted), unique=True) if wanted else st.just([])
            )
            free = [tp for tp in free if tp not in assigned]
            version = draw(st.integers(0, 3))
            group_members.append(
                {
                    "member_id": member_id,
                    "instance_id": draw(st.none() | st.sampled_from(["pod-a", "pod-b"])),
                    "subscription": Subscription(
                        topics, None, (), -1, draw(st.none() | st.just("rack-1")), version
                    ),
                    "assignment": MemberAssignment(tuple(assigned), None, version),
                }
            )
        instance_ids = [
            member["instance_id"] for member in group_members if member["instance_id"] is not None
        ]
        if len(instance_ids) != len(set(instance_ids)):
            continue
        history.append({"generation": generation, "members": group_members})
    return history


def render(history: list[dict[str, Any]]) -> tuple[str, str]:
    from assignors.protocol.wire import assignment_to_json, subscription_to_json

    dump, formatter = [], []
    for offset, generation in enumerate(history):
        as_json, as_bytes = [], []
        for member in generation["members"]:
            common = {
                "memberId": member["member_id"],
                "groupInstanceId": member["instance_id"],
                "clientId": "c",
                "clientHost": "h",
                "rebalanceTimeout": 1,
                "sessionTimeout": 1,
            }
            as_json.append(
                {
                    **common,
                    "subscription": subscription_to_json(member["subscription"]),
                    "assignment": assignment_to_json(member["assignment"]),
                }
            )
            as_bytes.append(
                {
                    **common,
                    "subscription": b64(encode_subscription(member["subscription"])),
                    "assignment": b64(encode_assignment(member["assignment"])),
                }
            )
        dump.append(dump_line(GROUP_KEY, classic_value(generation["generation"], as_json), offset))
        formatter.append(
            json.dumps(
                {
                    "key": {"type": 2, "data": {"group": "g"}},
                    "value": classic_value(generation["generation"], as_bytes),
                },
                separators=(",", ":"),
            )
        )
    return "\n".join(dump), "".join(formatter)


@settings(max_examples=60, deadline=None)
@given(classic_histories())
def test_any_classic_history_imports_the_same_from_both_renderings(
    history: list[dict[str, Any]],
) -> None:
    from assignors.traces.format import build_trace, parse_generation

    dump, formatter = render(history)
    rows = import_dump_log([("d.txt", dump)]).rows
    # the dump also knows each record's CreateTime; the formatter prints none
    assert [{**row, "timestamp_ms": None} for row in rows] == [
        {**row, "timestamp_ms": None} for row in import_formatter([("f.json", formatter)]).rows
    ]
    assert [row["generation"] for row in rows] == [item["generation"] for item in history]
    known: dict[str, int] = {}
    for row, generation in zip(rows, history, strict=True):
        expected_members = {
            member["member_id"]: {
                "member_id": member["member_id"],
                "instance_id": member["instance_id"],
                "rack": member["subscription"].at_version().rack_id,
                "topics": list(member["subscription"].topics),
                "assigned": sorted(
                    [tp.topic, tp.partition] for tp in member["assignment"].assigned_partitions
                ),
            }
            for member in generation["members"]
        }
        assert members(row) == expected_members
        for member in generation["members"]:
            for topic in member["subscription"].topics:
                known.setdefault(topic, 0)
            for topic, partition in member["assignment"].assigned_partitions:
                known[topic] = max(known[topic], partition + 1)
        subscribed = {
            topic for member in generation["members"] for topic in member["subscription"].topics
        }
        assert row["topics"] == [
            {"name": topic, "partitions": known[topic]}
            for topic in sorted(subscribed)
            if known[topic] > 0
        ]
    build_trace("g", [parse_generation(row, "d.txt", line) for line, row in enumerate(rows, 1)])


def test_imported_cooperative_history_scores_as_the_real_group_behaved(tmp_path: Path) -> None:
    from assignors.traces.replay import replay

    write_traces_jsonl(import_dump_log([fixture("dump-log.txt")]).rows, tmp_path / "t.jsonl")
    traces, _ = read_traces([tmp_path])
    payments = next(trace for trace in traces if trace.trace_id == "payments")
    scores = {row.generation: row for row in replay(payments, "recorded")}
    # generation 2 withholds payments-2 and payments-5 while their owners revoke them: they
    # leave their owners (moved) and nobody holds them until generation 3
    assert (scores[2].unassigned, scores[2].moved) == (2, 2)
    assert (scores[3].unassigned, scores[3].moved, scores[3].invalid) == (0, 0, 0)
    # the crashed member's payments-3, payments-4 and refunds-1 are forced to move
    assert (scores[4].forced, scores[4].moved) == (3, 0)


def test_coordinator_log_and_offsets_dump_of_one_history_agree_on_membership() -> None:
    from_dump = by_trace(import_dump_log([fixture("dump-log.txt")]).rows)["payments"]
    from_log = by_trace(
        import_coordinator_log([fixture("coordinator-classic.log")], catalog()).rows
    )["payments"]

    def membership(rows: list[dict[str, Any]]) -> list[tuple[int, list[tuple[str, Any]]]]:
        return [
            (
                row["generation"],
                sorted((member["member_id"], member["instance_id"]) for member in row["members"]),
            )
            for row in rows
        ]

    assert membership(from_log) == membership(from_dump)
    assert [row["topics"] for row in from_log] == [row["topics"] for row in from_dump]


def _classic_value_members(value: bytes) -> tuple[int, list[tuple[str, bytes, bytes]]]:
    """Generation and (member id, subscription, assignment) of GroupMetadataValue v3 bytes."""
    import struct

    position = 0

    def take(size: int) -> bytes:
        nonlocal position
        position += size
        return value[position - size : position]

    def string() -> str | None:
        length = struct.unpack(">h", take(2))[0]
        return None if length < 0 else take(length).decode()

    assert struct.unpack(">h", take(2))[0] == 3
    string()  # protocol type
    generation = struct.unpack(">i", take(4))[0]
    string(), string(), take(8)  # protocol, leader, state timestamp
    members = []
    for _ in range(struct.unpack(">i", take(4))[0]):
        member_id = string()
        string(), string(), string(), take(8)  # instance, client, host, timeouts
        subscription = take(struct.unpack(">i", take(4))[0])
        assignment = take(struct.unpack(">i", take(4))[0])
        members.append((str(member_id), subscription, assignment))
    assert position == len(value)
    return generation, members


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # raised inside kafka-python
def test_example_segment_is_a_valid_log_holding_what_the_dump_says() -> None:
    from kafka.record.memory_records import MemoryRecords

    from assignors.protocol.wire import decode_assignment, decode_subscription

    records = MemoryRecords((FIXTURES / "00000000000000000000.log").read_bytes())
    decoded = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        for record in batch:
            if record.key[:2] == b"\x00\x02" and record.value is not None:
                group = record.key[4:].decode()
                generation, group_members = _classic_value_members(record.value)
                if group == "payments":
                    decoded.append(
                        (
                            generation,
                            {
                                member_id: (
                                    decode_subscription(subscription).topics,
                                    decode_assignment(assignment).assigned_partitions,
                                )
                                for member_id, subscription, assignment in group_members
                            },
                        )
                    )
    from_dump = by_trace(import_dump_log([fixture("dump-log.txt")]).rows)["payments"]
    assert [generation for generation, _ in decoded] == [1, 2, 3, 4]
    for (_, by_member), row in zip(decoded, from_dump, strict=True):
        assert {
            member_id: (list(topics), sorted([tp.topic, tp.partition] for tp in assigned))
            for member_id, (topics, assigned) in by_member.items()
        } == {
            member["member_id"]: (member["topics"], member["assigned"]) for member in row["members"]
        }


json_bits = st.sampled_from(
    [
        '{"key":',
        '{"type":"2","data":',
        '{"group":"g"}',
        "}",
        " payload: ",
        '{"version":"3","data":',
        '"members":[',
        "]",
        ",",
        "null",
        '"x"',
        "<DELETE>",
        '{"protocolType":"consumer","generation":1',
        "0",
    ]
)
fuzz_lines = st.lists(
    st.one_of(
        st.text(max_size=30),
        st.lists(json_bits, max_size=8).map(lambda bits: "| offset: 0 key: " + "".join(bits)),
    ),
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(fuzz_lines)
def test_any_dump_text_imports_or_raises_a_located_input_error(lines: list[str]) -> None:
    try:
        import_dump_log([("d.txt", "\n".join(lines))])
    except InputError as error:
        assert error.source == "d.txt" and error.line is not None


@settings(max_examples=150, deadline=None)
@given(st.lists(json_bits, max_size=12).map("".join))
def test_any_formatter_text_imports_or_raises_a_located_input_error(text: str) -> None:
    try:
        import_formatter([("f.json", text)])
    except InputError as error:
        assert error.source == "f.json" and error.line is not None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "t", "AAE=", "x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["topic", "partitions", "topicId", "memberId", "topics", "data"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)
FIELDS = [
    "protocolType",
    "generation",
    "protocol",
    "members",
    "currentStateTimestamp",
    "memberId",
    "groupInstanceId",
    "subscription",
    "assignment",
    "epoch",
    "topics",
    "topicId",
    "topicName",
    "numPartitions",
    "partitionMetadata",
    "instanceId",
    "rackId",
    "subscribedTopicNames",
    "subscribedTopicRegex",
    "serverAssignor",
    "topicPartitions",
    "assignmentEpoch",
    "memberEpoch",
    "groupId",
    "group",
]


fuzz_records = st.lists(
    st.tuples(
        st.integers(2, 8),
        st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
        st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(fuzz_records)
def test_records_with_any_field_values_import_or_raise_a_located_input_error(
    records: list[tuple[int, dict[str, Any], dict[str, Any]]],
) -> None:
    lines = []
    for key_type, value, key in records:
        member = {
            "memberId": "a",
            "subscription": value.get("subscription"),
            "assignment": value.get("assignment"),
            **value,
        }
        data = {"protocolType": "consumer", "generation": 1, "members": [member], **value}
        lines.append(
            dump_line(
                {
                    "type": str(key_type),
                    "data": {"group": "g", "groupId": "g", "memberId": "a", **key},
                },
                {"version": "0", "data": data},
            )
        )
    try:
        import_dump_log([("d.txt", "\n".join(lines))])
    except InputError as error:
        assert error.source == "d.txt" and 1 <= (error.line or 0) <= len(lines)


log_words = st.sampled_from(
    [
        "Stabilized group ",
        "g ",
        "generation ",
        "1 ",
        "x ",
        "with ",
        "members",
        "[GroupId g] ",
        "Member ",
        "m ",
        "joins the consumer group",
        "Computed a new target assignment for epoch ",
        ": {",
        "m=MemberAssignment(partitions={Z=[0, 1]})",
        "}",
        ".",
        "Preparing to rebalance group ",
        "(reason: ",
        ")",
        "has left group ",
        "Group ",
        " is now empty",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(log_words, max_size=10).map("".join), max_size=4))
def test_any_coordinator_lines_import_or_raise_a_located_input_error(messages: list[str]) -> None:
    text = "\n".join(
        f"[2026-01-05 10:00:0{index},000] INFO [GroupCoordinator 1]: {message} "
        "(kafka.coordinator.group.GroupCoordinator)"
        for index, message in enumerate(messages)
    )
    try:
        import_coordinator_log([("a.log", text)], TopicCatalog({"t": TopicInfo("t", 1)}))
    except InputError as error:
        assert error.source == "a.log" and error.line is not None


# ---------------------------------------------------------------------------------------------
# regressions found by fuzzing (tests/test_fuzz_importers.py): each was a traceback or an error
# blaming the output file before


def _error(call: Any) -> str:
    with pytest.raises(InputError) as caught:
        call()
    return str(caught.value)


def test_dump_log_numbers_of_5001_digits_are_refused_naming_file_line_and_field() -> None:
    good = dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [0])]))
    huge_time = good.replace("CreateTime: 1762000000000", "CreateTime: " + "9" * 5001)
    assert _error(lambda: import_dump_log([("d.txt", huge_time)])).startswith(
        "d.txt:1: CreateTime: must be a 64-bit integer (got '99999999999...')"
    )
    huge_type = good.replace('"type":"2"', '"type":"' + "9" * 5001 + '"')
    assert _error(lambda: import_dump_log([("d.txt", "\n" + huge_type)])).startswith(
        "d.txt:2: key.type: must be a 64-bit integer"
    )


def test_json_of_5001_digit_integers_or_deep_nesting_is_refused_in_every_json_input() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    payload = dump_line(GROUP_KEY, {"version": "3", "data": {"x": "@@"}}).replace('"@@"', deep)
    assert _error(lambda: import_dump_log([("d.txt", payload)])) == (
        "d.txt:1: payload: payload is not valid JSON: nested deeper than 64"
    )
    record = '{"key":{"type":2,"data":{"group":"g"}},"value":{"version":' + "9" * 5001 + "}}"
    assert _error(lambda: import_formatter([("f.json", record)])) == (
        "f.json:1: record: value.version: not valid JSON: integer of 5001 digits (at most 20)"
    )
    assert _error(lambda: parse_topics_file('{"orders": ' + deep + "}", "t.json")) == (
        "t.json:1: topics file: not valid JSON: nested deeper than 64"
    )


def test_formatter_text_numbers_of_5001_digits_are_refused_naming_the_field() -> None:
    record = '{"key":{"type":"' + "9" * 5001 + '","data":{"group":"g"}},"value":null}'
    assert _error(lambda: import_formatter([("f.json", record)])).startswith(
        "f.json:1: key.type: must be a 64-bit integer"
    )


def test_coordinator_log_numbers_of_5001_digits_are_refused_naming_file_and_line() -> None:
    line = (
        "[2026-01-05 10:00:05,000] INFO [GroupCoordinator 2]: Stabilized group g generation "
        + "9" * 5001
        + " with 3 members (kafka.coordinator.group.GroupCoordinator)"
    )
    topics = TopicCatalog({"t": TopicInfo("t", 1)})
    assert _error(lambda: import_coordinator_log([("a.log", line)], topics)).startswith(
        "a.log:1: generation: must be a 64-bit integer"
    )


def test_generation_breaking_the_trace_format_is_blamed_on_the_capture_line() -> None:
    good = dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [0])]))
    nameless = good.replace('"group":"g"', '"group":""')
    assert _error(lambda: import_dump_log([("d.txt", good + "\n" + nameless)])) == (
        "d.txt:2: trace_id: must be a non-empty string (got '')"
    )
    line = (
        "[2026-01-05 10:00:05,000] INFO [GroupCoordinator 2]: Stabilized group g generation "
        f"{2**63} with 0 members (kafka.coordinator.group.GroupCoordinator)"
    )
    topics = TopicCatalog({"t": TopicInfo("t", 1)})
    assert _error(lambda: import_coordinator_log([("a.log", line)], topics)) == (
        "a.log:1: generation: must be a 64-bit integer (got '92233720368...')"
    )
    from assignors.traces.format import TraceMember
    from assignors.traces.importers.common import Snapshot, TraceAssembler

    assembler = TraceAssembler("g", TopicCatalog.empty())
    snapshot = Snapshot(2**63, (TraceMember("a\x00", frozenset({"t"})),))
    assert _error(lambda: assembler.add(snapshot, "x.txt", 3)) == (
        "x.txt:3: trace g: generation: must fit in 64 bits (got 9223372036854775808)"
    )
    assert assembler.rows == []


def test_lenient_import_skips_a_bad_generation_and_keeps_the_trace_consistent() -> None:
    first = dump_line(GROUP_KEY, classic_value(1, [classic_member("a", [0])]))
    bad = dump_line(GROUP_KEY, classic_value(2, [classic_member("", [0])]), offset=1)
    last = dump_line(GROUP_KEY, classic_value(3, [classic_member("b", [0])]), offset=2)
    result = import_dump_log([("d.txt", "\n".join([first, bad, last]))], None, LENIENT)
    assert [row["generation"] for row in result.rows] == [1, 3]
    assert [row["reason"] for row in result.rows] == [
        "first generation seen: 1 member",
        "joined: b; left: a",
    ]
    assert [
        (note.line, "member_id: must be a non-empty string" in note.reason)
        for note in result.skipped
    ] == [(2, True)]
