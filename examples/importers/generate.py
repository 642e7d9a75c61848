"""Write the importer examples: dump-log.txt, formatter.json and the segment they describe.

    python examples/importers/generate.py

One scenario, two renderings, so the two outputs agree record for record:

- ``payments`` (classic, cooperative-sticky, two static members and one dynamic): c-3 joins
  (generation 2 withholds payments-2 and payments-5, generation 3 hands them over), then the
  member on pod-2 crashes (generation 4);
- ``reports`` (classic, range, an older client sending Subscription v1): two generations, the
  group is deleted (tombstone) and later re-created (its generation starts again at 1);
- ``connect-sink``: a Kafka Connect group (protocol type ``connect``: not a consumer group);
- ``orders-848`` (KIP-848): m-1 joins, m-2 joins, m-1 leaves, with topic ids mapped by the
  ConsumerGroupPartitionMetadata record;
- committed offsets, and one record type the tool itself does not know.

The record bytes are encoded for real (keys, values, record batches with their CRC32C), so the
sizes and checksums in ``dump-log.txt`` are what kafka-dump-log prints for ``00000000000000000000.log``.
ConsumerProtocol bytes come from ``assignors.protocol.wire``.
"""

from __future__ import annotations

import base64
import json
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from assignors.model import TopicPartition as TP  # noqa: E402
from assignors.protocol.wire import (  # noqa: E402
    MemberAssignment,
    Subscription,
    assignment_to_json,
    encode_assignment,
    encode_cooperative_user_data,
    encode_subscription,
    subscription_to_json,
)

T0 = 1767607200000  # 2026-01-05 10:00:00 UTC
SEGMENT = "00000000000000000000.log"  # kafka-dump-log reads the base offset from the name

# ---------------------------------------------------------------------------------------------
# binary helpers (Kafka's classic and flexible encodings)


def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)


def string(v):
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def nbytes(v):
    return i32(-1) if v is None else i32(len(v)) + v


def uvarint(n):
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def varint(n):
    return uvarint((n << 1) ^ (n >> 63))


def cstring(v):
    if v is None:
        return uvarint(0)
    raw = v.encode()
    return uvarint(len(raw) + 1) + raw


def carray(items):
    return uvarint(len(items) + 1) + b"".join(items)


def uuid_bytes(text):
    return base64.urlsafe_b64decode(text + "==")


TAGS = uvarint(0)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# records: (key type, key json, key bytes, value version, value json, value bytes)


def group_key(group):
    return 2, {"group": group}, i16(2) + string(group)


def offset_commit(group, topic, partition, offset, when):
    key = (1, {"group": group, "topic": topic, "partition": partition},
           i16(1) + string(group) + string(topic) + i32(partition))
    value_json = {"offset": offset, "leaderEpoch": 0, "metadata": "", "commitTimestamp": when}
    value = i16(3) + i64(offset) + i32(0) + string("") + i64(when)
    return key, 3, value_json, value


def classic_member(member_id, instance_id, client, host, subscription, assignment):
    sub_bytes = encode_subscription(subscription)
    asg_bytes = b"" if assignment is None else encode_assignment(assignment)
    as_json = {
        "memberId": member_id, "groupInstanceId": instance_id, "clientId": client,
        "clientHost": host, "rebalanceTimeout": 300000, "sessionTimeout": 45000,
    }
    binary = (string(member_id) + string(instance_id) + string(client) + string(host)
              + i32(300000) + i32(45000) + nbytes(sub_bytes) + nbytes(asg_bytes))
    return as_json, binary, sub_bytes, asg_bytes, subscription, assignment


def group_metadata(group, protocol_type, generation, protocol, leader, when, members):
    value_json = {"protocolType": protocol_type, "generation": generation, "protocol": protocol,
                  "leader": leader, "currentStateTimestamp": when, "members": []}
    binary = (i16(3) + string(protocol_type) + i32(generation) + string(protocol)
              + string(leader) + i64(when) + i32(len(members)))
    for as_json, member_binary, sub_bytes, asg_bytes, subscription, assignment in members:
        binary += member_binary
        decoded = dict(as_json)
        if protocol_type == "consumer":
            decoded["subscription"] = subscription_to_json(subscription)
            # kafka-dump-log keeps the base64 when it cannot decode (empty bytes: no assignment)
            decoded["assignment"] = (assignment_to_json(assignment) if assignment is not None
                                     else "")
        else:
            decoded["subscription"] = base64.b64encode(sub_bytes).decode()
            decoded["assignment"] = base64.b64encode(asg_bytes).decode()
        raw = dict(as_json, subscription=base64.b64encode(sub_bytes).decode(),
                   assignment=base64.b64encode(asg_bytes).decode())
        value_json["members"].append((decoded, raw))
    return group_key(group), 3, value_json, binary


def tombstone(key):
    return key, None, None, None


def kip848_key(kind, group, member=None):
    data = {"groupId": group} if member is None else {"groupId": group, "memberId": member}
    binary = i16(kind) + string(group) + (b"" if member is None else string(member))
    return kind, data, binary


def epoch_record(group, epoch):
    return kip848_key(3, group), 0, {"epoch": epoch}, i16(0) + i32(epoch) + TAGS


def topics_record(group, topics):
    items = [uuid_bytes(tid) + cstring(name) + i32(count) + carray([]) + TAGS
             for tid, name, count in topics]
    value_json = {"topics": [{"topicId": tid, "topicName": name, "numPartitions": count,
                              "partitionMetadata": []} for tid, name, count in topics]}
    return kip848_key(4, group), 0, value_json, i16(0) + carray(items) + TAGS


def member_record(group, member, client, host, topics, assignor):
    value_json = {"instanceId": None, "rackId": None, "clientId": client, "clientHost": host,
                  "subscribedTopicNames": topics, "subscribedTopicRegex": None,
                  "rebalanceTimeoutMs": 300000, "serverAssignor": assignor}
    binary = (i16(0) + cstring(None) + cstring(None) + cstring(client) + cstring(host)
              + carray([cstring(t) for t in topics]) + cstring(None) + i32(300000)
              + cstring(assignor) + TAGS)
    return kip848_key(5, group, member), 0, value_json, binary


def topic_partitions(entries):
    as_json = [{"topicId": tid, "partitions": parts} for tid, parts in entries]
    binary = carray([uuid_bytes(tid) + carray([i32(p) for p in parts]) + TAGS
                     for tid, parts in entries])
    return as_json, binary


def target_member(group, member, entries):
    as_json, binary = topic_partitions(entries)
    return (kip848_key(7, group, member), 0, {"topicPartitions": as_json},
            i16(0) + binary + TAGS)


def target_epoch(group, epoch):
    return kip848_key(6, group), 0, {"assignmentEpoch": epoch}, i16(0) + i32(epoch) + TAGS


def current_member(group, member, epoch, previous, state, assigned, pending):
    assigned_json, assigned_binary = topic_partitions(assigned)
    pending_json, pending_binary = topic_partitions(pending)
    value_json = {"memberEpoch": epoch, "previousMemberEpoch": previous, "state": state,
                  "assignedPartitions": assigned_json, "partitionsPendingRevocation": pending_json}
    binary = (i16(0) + i32(epoch) + i32(previous) + i8(state) + assigned_binary
              + pending_binary + TAGS)
    return kip848_key(8, group, member), 0, value_json, binary


UNKNOWN = "unknown"  # a record whose key type the tool does not know


# ---------------------------------------------------------------------------------------------
# the scenario: batches of (timestamp, records)

RACKS = {"pod-1": "eu-west-1a", "pod-2": "eu-west-1b", "c-3": "eu-west-1c"}
PAY = ("payments", "refunds")


def pay_sub(rack, owned, generation):
    return Subscription(PAY, encode_cooperative_user_data(generation), tuple(owned), generation,
                        rack, version=3)


def pay_asg(partitions):
    return MemberAssignment(tuple(partitions), None, version=3)


M1 = "consumer-payments-1-6c1b2f0e-3f7a-4d51-9a53-2a1f0c9e7d11"
M2 = "consumer-payments-1-0b9e4c77-5d02-4e8b-b6a4-71d3f2c8a905"
M3 = "consumer-payments-1-e2a7d9c3-81f4-4b6e-a0d5-4c9b8e1f2a37"


def payments_generation(generation, when, members):
    built = []
    for member_id, instance, host, owned, owned_generation, assigned in members:
        rack = RACKS[instance or "c-3"]
        built.append(classic_member(member_id, instance, "consumer-payments-1", host,
                                    pay_sub(rack, owned, owned_generation), pay_asg(assigned)))
    return group_metadata("payments", "consumer", generation, "cooperative-sticky", M1, when,
                          built)


P = lambda *ps: [TP("payments", p) for p in ps]  # noqa: E731
R = lambda *ps: [TP("refunds", p) for p in ps]  # noqa: E731

G1 = {M1: P(0, 1, 2) + R(0), M2: P(3, 4, 5) + R(1)}
G2 = {M1: P(0, 1) + R(0), M2: P(3, 4) + R(1), M3: []}
G3 = {M1: P(0, 1) + R(0), M2: P(3, 4) + R(1), M3: P(2, 5)}
G4 = {M1: P(0, 1, 3) + R(0), M3: P(2, 4, 5) + R(1)}

REPORT_SUB = Subscription(("reports-input",), None, (), -1, None, version=1)


def reports_generation(generation, when, members):
    built = [classic_member(member_id, None, "reports-job", "/10.2.0.7", REPORT_SUB,
                            MemberAssignment(tuple(TP("reports-input", p) for p in parts), None,
                                             version=1))
             for member_id, parts in members]
    return group_metadata("reports", "consumer", generation, "range", members[0][0], when, built)


ORDERS, AUDIT = "Yc5kGZ3oRcqS2tQnq1R0sg", "qL7yX0bYT0m0Zt1mV3cD9A"
G848 = "orders-848"
K1, K2 = "Xv1HKc7pTGmjQ2Y4tZyDbA", "p0Ld9sWcQ9e3n8KfR5uJ7w"

BATCHES = [
    (T0 + 3000, [payments_generation(1, T0 + 3000, [
        (M1, "pod-1", "/10.1.0.11", [], -1, G1[M1]),
        (M2, "pod-2", "/10.1.0.12", [], -1, G1[M2])])]),
    (T0 + 3100, [group_metadata("connect-sink", "connect", 7, "sessioned", "connect-1",
                                T0 + 3100, [])]),
    (T0 + 60000, [offset_commit("payments", "payments", 0, 1200, T0 + 60000),
                  offset_commit("payments", "refunds", 0, 87, T0 + 60000)]),
    (T0 + 65000, [reports_generation(1, T0 + 65000, [("reports-job-a", [0, 1, 2])])]),
    (T0 + 120000, [payments_generation(2, T0 + 120000, [
        (M1, "pod-1", "/10.1.0.11", G1[M1], 1, G2[M1]),
        (M2, "pod-2", "/10.1.0.12", G1[M2], 1, G2[M2]),
        (M3, None, "/10.1.0.13", [], -1, G2[M3])])]),
    (T0 + 121000, [payments_generation(3, T0 + 121000, [
        (M1, "pod-1", "/10.1.0.11", G2[M1], 2, G3[M1]),
        (M2, "pod-2", "/10.1.0.12", G2[M2], 2, G3[M2]),
        (M3, None, "/10.1.0.13", [], 2, G3[M3])])]),
    (T0 + 125000, [reports_generation(2, T0 + 125000, [("reports-job-a", [0, 1]),
                                                        ("reports-job-b", [2])])]),
    (T0 + 130000, [UNKNOWN]),
    # KIP-848: m-1 joins (epoch 1)
    (T0 + 140000, [member_record(G848, K1, "consumer-orders-1", "/10.3.0.21",
                                 ["audit", "orders"], "uniform"),
                   topics_record(G848, [(AUDIT, "audit", 1), (ORDERS, "orders", 4)]),
                   epoch_record(G848, 1),
                   target_member(G848, K1, [(AUDIT, [0]), (ORDERS, [0, 1, 2, 3])]),
                   target_epoch(G848, 1),
                   current_member(G848, K1, 1, 0, 0, [(AUDIT, [0]), (ORDERS, [0, 1, 2, 3])],
                                  [])]),
    # m-2 joins (epoch 2): m-1 must release orders-2 and orders-3 first
    (T0 + 150000, [member_record(G848, K2, "consumer-orders-2", "/10.3.0.22",
                                 ["audit", "orders"], "uniform"),
                   epoch_record(G848, 2),
                   target_member(G848, K1, [(AUDIT, [0]), (ORDERS, [0, 1])]),
                   target_member(G848, K2, [(ORDERS, [2, 3])]),
                   target_epoch(G848, 2),
                   current_member(G848, K2, 2, 0, 2, [], [])]),
    (T0 + 152000, [current_member(G848, K1, 1, 0, 1, [(AUDIT, [0]), (ORDERS, [0, 1])],
                                  [(ORDERS, [2, 3])])]),
    (T0 + 155000, [current_member(G848, K1, 2, 1, 0, [(AUDIT, [0]), (ORDERS, [0, 1])], []),
                   current_member(G848, K2, 2, 0, 0, [(ORDERS, [2, 3])], [])]),
    (T0 + 160000, [offset_commit("payments", "payments", 2, 1310, T0 + 160000)]),
    # the member on pod-2 crashes (generation 4)
    (T0 + 190000, [payments_generation(4, T0 + 190000, [
        (M1, "pod-1", "/10.1.0.11", G3[M1], 3, G4[M1]),
        (M3, None, "/10.1.0.13", G3[M3], 3, G4[M3])])]),
    # m-1 leaves (epoch 3)
    (T0 + 200000, [tombstone(kip848_key(8, G848, K1)), tombstone(kip848_key(7, G848, K1)),
                   tombstone(kip848_key(5, G848, K1)), epoch_record(G848, 3),
                   target_member(G848, K2, [(AUDIT, [0]), (ORDERS, [0, 1, 2, 3])]),
                   target_epoch(G848, 3),
                   current_member(G848, K2, 3, 2, 0, [(AUDIT, [0]), (ORDERS, [0, 1, 2, 3])],
                                  [])]),
    # reports is emptied, its offsets expire, the group is deleted, then created again
    (T0 + 300000, [tombstone(group_key("reports"))]),
    (T0 + 400000, [reports_generation(1, T0 + 400000, [("reports-job-c", [0, 1, 2])])]),
]


# ---------------------------------------------------------------------------------------------
# rendering


def json_text(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def member_view(value_json, decoded):
    if value_json is None or "members" not in value_json:
        return value_json
    index = 0 if decoded else 1
    return dict(value_json, members=[pair[index] for pair in value_json["members"]])


def encode_batch(base_offset, when, records):
    body = b""
    for delta, record in enumerate(records):
        if record == UNKNOWN:
            key, value = i16(17) + string("orders-848") + string("^orders-.*"), None
        else:
            (_, _, key), _, _, value = record
        inner = (i8(0) + varint(0) + varint(delta) + varint(len(key)) + key
                 + (varint(-1) if value is None else varint(len(value)) + value) + varint(0))
        body += varint(len(inner)) + inner
    after_crc = (i16(0) + i32(len(records) - 1) + i64(when) + i64(when) + i64(-1) + i16(-1)
                 + i32(-1) + i32(len(records)) + body)
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    batch = i64(base_offset) + i32(batch_length) + i32(0) + i8(2) + struct.pack(">I", crc) \
        + after_crc
    return batch, crc


def render():
    segment = b""
    dump = [f"Dumping {SEGMENT}", "Log starting offset: 0"]
    formatter = []
    offset = 0
    for when, records in BATCHES:
        batch, crc = encode_batch(offset, when, records)
        dump.append(
            f"baseOffset: {offset} lastOffset: {offset + len(records) - 1} count: {len(records)} "
            f"baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
            f"partitionLeaderEpoch: 0 isTransactional: false isControl: false "
            f"deleteHorizonMs: OptionalLong.empty position: {len(segment)} CreateTime: {when} "
            f"size: {len(batch)} magic: 2 compresscodec: none crc: {crc} isvalid: true")
        for delta, record in enumerate(records):
            record_offset = offset + delta
            if record == UNKNOWN:
                key_size = 2 + 2 + len("orders-848") + 2 + len("^orders-.*")
                dump.append(f"| offset: {record_offset} CreateTime: {when} keySize: {key_size} "
                            f"valueSize: -1 sequence: -1 headerKeys: [] key: Unknown record "
                            f"type 17 at offset {record_offset}, skipping.")
                formatter.append({"key": {"version": 17, "data": "unknown"}, "value": None})
                continue
            (key_type, key_json, key), version, value_json, value = record
            value_size = -1 if value is None else len(value)
            payload = "<DELETE>" if value is None else json_text(
                {"version": str(version), "data": member_view(value_json, True)})
            dump.append(
                f"| offset: {record_offset} CreateTime: {when} keySize: {len(key)} "
                f"valueSize: {value_size} sequence: -1 headerKeys: [] key: "
                f"{json_text({'type': str(key_type), 'data': key_json})} payload: {payload}")
            if key_type == 2:
                formatter.append({
                    "key": {"type": 2, "data": key_json},
                    "value": None if value is None else {
                        "version": version, "data": member_view(value_json, False)}})
        segment += batch
        offset += len(records)
    return segment, "\n".join(dump) + "\n", "".join(json_text(item) for item in formatter)


def main():
    segment, dump, formatter = render()
    (HERE / SEGMENT).write_bytes(segment)
    (HERE / "dump-log.txt").write_text(dump, encoding="utf-8")
    (HERE / "formatter.json").write_text(formatter, encoding="utf-8")


if __name__ == "__main__":
    main()
