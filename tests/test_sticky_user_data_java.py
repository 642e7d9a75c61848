"""The eager sticky user data the kafka-python adapter writes, against Java's StickyAssignor.

``tests/data/sticky-user-data-java.jsonl`` holds what Kafka's own StickyAssignor did with the
user data, recorded with ``tests/java/StickyUserDataOracle.java`` compiled against the Java oracle
(shared/tools/java-oracle) at apache/kafka 1eb7644349cb07139d6a3c1ad1986979647cac99:

- ``encode``: the bytes ``StickyAssignor.serializeTopicPartitionAssignment`` writes for a member
  that owned ``owned`` in ``generation``; the adapter must write the same bytes;
- ``decode``: what a Java leader's ``StickyAssignor.memberData`` reads from the adapter's bytes
  (and from kafka-python's own layout, which Java cannot read: it falls back to no claims);
- ``lead``: the assignment a Java StickyAssignor leader makes for a group where a ktk member
  claims partitions through its user data.

With ``KTK_JAVA_ORACLE=BUILD/classes`` (a built harness), ``java`` and ``javac`` on the path, the
live test runs the same cases through Java again. To record the vectors again:

    python tests/test_sticky_user_data_java.py --oracle BUILD/classes  # writes tests/data/
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.model import NO_GENERATION, TopicPartition
from assignors.protocol.kafka_python import sticky_user_data
from assignors.protocol.wire import StickyUserData, decode_sticky_user_data, encode_sticky_user_data

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "sticky-user-data-java.jsonl"
JAVA_SOURCE = HERE / "java" / "StickyUserDataOracle.java"
JAVA_CLASS = "org.apache.kafka.clients.consumer.StickyUserDataOracle"
KAFKA_COMMIT = "1eb7644349cb07139d6a3c1ad1986979647cac99"

Owned = list[list[Any]]

ENCODE_CASES: list[tuple[Owned, int]] = [
    ([["orders", 0], ["orders", 2]], 5),
    ([], 3),
    ([["a", 0], ["a", 2], ["b", 1], ["orders", 3]], 7),
    ([["t\u00f3pico", 2147483647]], 2147483647),
    ([["orders", 1]], NO_GENERATION),
]

# (partition counts, {member: owned by the adapter, or None for a member without user data})
LEAD_CASES: list[tuple[dict[str, int], dict[str, Owned | None]]] = [
    ({"orders": 4}, {"java": None, "ktk": [["orders", 0], ["orders", 3]]}),
    (
        {"a": 3, "b": 3},
        {"java-0": None, "java-1": None, "ktk": [["a", 0], ["b", 0]]},
    ),
]


def _partitions(owned: Owned) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(topic, partition) for topic, partition in owned)


def _spec(owned: Owned) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in owned:
        by_topic.setdefault(topic, []).append(partition)
    return " ".join(f"{topic}:{','.join(map(str, parts))}" for topic, parts in by_topic.items())


def _kafka_python_layout(owned: Owned, generation: int) -> bytes:
    return encode_sticky_user_data(StickyUserData(_partitions(owned), generation, 1))


def _commands() -> list[str]:
    commands = [f"encode {generation} {_spec(owned)}".strip() for owned, generation in ENCODE_CASES]
    for owned, generation in ENCODE_CASES:
        commands.append(f"decode {sticky_user_data(_partitions(owned), generation).hex()}")
        commands.append(f"decode {_kafka_python_layout(owned, generation).hex()}")
    for counts, members in LEAD_CASES:
        listed = ",".join(f"{topic}:{count}" for topic, count in counts.items())
        claims = " ".join(
            f"{member}={'-' if owned is None else sticky_user_data(_partitions(owned), 1).hex()}"
            for member, owned in members.items()
        )
        commands.append(f"lead {listed} {claims}")
    return commands


def java_answers(oracle: str) -> list[str]:
    """Compile the oracle class against the harness classes and run every command once."""
    with tempfile.TemporaryDirectory() as build:
        subprocess.run(
            ["javac", "-nowarn", "-d", build, "-cp", oracle, str(JAVA_SOURCE)],
            check=True,
            capture_output=True,
        )
        done = subprocess.run(
            ["java", "-cp", f"{build}{os.pathsep}{oracle}", JAVA_CLASS],
            input="\n".join(_commands()) + "\n",
            capture_output=True,
            text=True,
            check=True,
        )
    return done.stdout.splitlines()


def _rows() -> list[dict[str, Any]]:
    if not DATA.is_file():
        return []
    with DATA.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines][1:]


def _rows_of(kind: str) -> list[dict[str, Any]]:
    return [row for row in _rows() if row["kind"] == kind]


def test_vectors_file_names_its_kafka_commit_and_every_command() -> None:
    header = json.loads(DATA.read_text(encoding="utf-8").splitlines()[0])["header"]
    assert header["kafka_commit"] == KAFKA_COMMIT
    assert [row["command"] for row in _rows()] == _commands()


@pytest.mark.parametrize("row", _rows_of("encode"), ids=lambda row: row["command"])
def test_adapter_writes_the_bytes_javas_sticky_assignor_writes(row: dict[str, Any]) -> None:
    written = sticky_user_data(_partitions(row["owned"]), row["generation"])
    assert written.hex() == row["java"]
    decoded = decode_sticky_user_data(written)
    assert decoded == StickyUserData(_partitions(row["owned"]), row["generation"], None)


@pytest.mark.parametrize("row", _rows_of("decode"), ids=lambda row: row["command"][:60])
def test_java_leader_reads_the_adapters_claims_and_not_kafka_pythons_layout(
    row: dict[str, Any],
) -> None:
    generation, *claims = row["java"].split(" ")
    data = bytes.fromhex(row["command"].split(" ")[1])
    ours = decode_sticky_user_data(data)
    if ours.version_prefix is None:  # Java's layout: Java reads exactly what we wrote
        assert generation == str(ours.generation)
        assert claims == [f"{tp.topic}:{tp.partition}" for tp in ours.previous_assignment]
    else:  # kafka-python's layout: Java's V1 and V0 reads both fail, it claims nothing
        assert (generation, claims) == (str(NO_GENERATION), [])


@pytest.mark.parametrize("row", _rows_of("lead"), ids=lambda row: row["command"][:40])
def test_java_sticky_leader_keeps_what_a_ktk_member_claims(row: dict[str, Any]) -> None:
    _, members = LEAD_CASES[_rows_of("lead").index(row)]
    assignment = dict(entry.split("=") for entry in row["java"].split(" "))
    for member, owned in members.items():
        if owned is not None:
            assert set(assignment[member].split(",")) == {f"{t}:{p}" for t, p in owned}


@pytest.mark.skipif(
    not os.environ.get("KTK_JAVA_ORACLE")
    or shutil.which("java") is None
    or shutil.which("javac") is None,
    reason="set KTK_JAVA_ORACLE to the oracle harness classes to run Java live",
)
def test_javas_sticky_assignor_still_agrees_live() -> None:
    assert java_answers(os.environ["KTK_JAVA_ORACLE"]) == [row["java"] for row in _rows()]


def _row(command: str, answer: str, index: int) -> dict[str, Any]:
    kind = command.split(" ")[0]
    row: dict[str, Any] = {"kind": kind, "command": command, "java": answer}
    if kind == "encode":
        owned, generation = ENCODE_CASES[index]
        row.update(owned=owned, generation=generation)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description="record tests/data/sticky-user-data-java.jsonl")
    parser.add_argument("--oracle", required=True, help="the harness classes directory")
    parser.add_argument("--out", default=str(DATA))
    arguments = parser.parse_args()
    commands = _commands()
    answers = java_answers(arguments.oracle)
    header = {
        "header": {
            "what": "Kafka's StickyAssignor on sticky user data: bytes it writes, claims it "
            "reads, assignments it makes",
            "kafka_commit": KAFKA_COMMIT,
            "classes": "StickyAssignor through tests/java/StickyUserDataOracle.java compiled "
            "against the oracle harness (shared/tools/java-oracle)",
            "produced_by": "python tests/test_sticky_user_data_java.py --oracle BUILD/classes",
        }
    }
    with open(arguments.out, "w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for index, (command, answer) in enumerate(zip(commands, answers, strict=True)):
            out.write(json.dumps(_row(command, answer, index), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "orders", "t\u00f3pico", "x" * 300]), st.integers(0, 2**31 - 1)
        ),
        unique=True,
        max_size=40,
    ),
    st.integers(-1, 2**31 - 1),
)
def test_the_adapters_user_data_reads_back_as_javas_layout(owned, generation) -> None:
    partitions = _partitions([list(pair) for pair in owned])
    written = sticky_user_data(partitions, generation)
    if not partitions and generation == NO_GENERATION:
        assert written == b""
        return
    assert decode_sticky_user_data(written) == StickyUserData(tuple(sorted(partitions)), generation)
