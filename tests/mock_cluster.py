"""librdkafka's mock cluster in a child process, for tests that need real consumer groups.

confluent-kafka bundles librdkafka, whose mock cluster (``rd_kafka_mock_cluster_new``) is a
Kafka-protocol broker set listening on 127.0.0.1 only. Run as a script, this file creates one
through ctypes on the bundled shared library (3 brokers by default, topics with exact partition
counts, optional broker racks), prints the bootstrap servers as its first stdout line, and serves
until its stdin closes or ``--lifetime`` seconds pass, whichever comes first.

:class:`MockCluster` starts that script in its own process group and stops it by process group
id, so a test that fails (or a pytest that is killed) never leaves brokers behind for long:

    with MockCluster({"orders": 6}) as cluster:
        KafkaConsumer("orders", bootstrap_servers=cluster.bootstrap_servers, api_version=(2, 3))

kafka-python must be told ``api_version=(2, 3)`` against the mock (its version probe does not
settle on what the mock answers).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

START_TIMEOUT_S = 20.0
DEFAULT_LIFETIME_S = 300.0
JOIN_DELAY_MS = 1000
"""The mock's fixed wait for more members before it completes a join (Kafka's
``group.initial.rebalance.delay.ms``); set low so tests run fast but all members of a group
started together still land in one generation."""


def bundled_librdkafka() -> str:
    """Path of the librdkafka shared library confluent-kafka ships."""
    import confluent_kafka

    site = Path(confluent_kafka.__file__).resolve().parent.parent
    found = sorted(glob.glob(str(site / "confluent_kafka.libs" / "librdkafka*.so*")))
    found += sorted(glob.glob(str(site / "confluent_kafka" / ".dylibs" / "librdkafka*.dylib")))
    if not found:
        raise FileNotFoundError(f"no librdkafka shared library beside {confluent_kafka.__file__}")
    return found[0]


def _serve(brokers: int, topics: Mapping[str, int], racks: list[str], lifetime_s: float) -> int:
    lib = ctypes.CDLL(bundled_librdkafka())
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    lib.rd_kafka_mock_broker_set_rack.restype = ctypes.c_int
    lib.rd_kafka_mock_broker_set_rack.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]

    errors = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    lib.rd_kafka_conf_set(conf, b"log_level", b"0", errors, len(errors))
    handle = lib.rd_kafka_new(0, conf, errors, len(errors))  # 0 = RD_KAFKA_PRODUCER
    if not handle:
        print(f"rd_kafka_new failed: {errors.value.decode()}", file=sys.stderr)
        return 1
    cluster = lib.rd_kafka_mock_cluster_new(handle, brokers)
    if not cluster:
        print("rd_kafka_mock_cluster_new failed", file=sys.stderr)
        return 1
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, JOIN_DELAY_MS)
    for broker_id, rack in enumerate(racks, 1):
        lib.rd_kafka_mock_broker_set_rack(cluster, broker_id, rack.encode())
    for name, partitions in topics.items():
        replication = min(3, brokers)
        code = lib.rd_kafka_mock_topic_create(cluster, name.encode(), partitions, replication)
        if code:
            print(f"rd_kafka_mock_topic_create({name}) failed: {code}", file=sys.stderr)
            return 1
    print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    deadline = time.monotonic() + lifetime_s
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([sys.stdin], [], [], min(left, 1.0))
        if ready and not sys.stdin.buffer.read1(4096):
            break  # stdin closed: the parent is done (or gone)
    lib.rd_kafka_mock_cluster_destroy(cluster)
    return 0


def _topic(text: str) -> tuple[str, int]:
    name, _, count = text.rpartition(":")
    return name, int(count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topic", type=_topic, action="append", default=[], help="NAME:PARTITIONS")
    parser.add_argument("--rack", action="append", default=[], help="rack of broker 1, 2, ...")
    parser.add_argument("--lifetime", type=float, default=DEFAULT_LIFETIME_S)
    args = parser.parse_args(argv)
    return _serve(args.brokers, dict(args.topic), args.rack, args.lifetime)


class MockCluster:
    """A mock cluster in a child process (its own process group), for a ``with`` block."""

    def __init__(
        self,
        topics: Mapping[str, int],
        *,
        brokers: int = 3,
        racks: list[str] | None = None,
        lifetime_s: float = DEFAULT_LIFETIME_S,
    ) -> None:
        self.topics = dict(topics)
        self.brokers = brokers
        self.racks = list(racks or [])
        self.lifetime_s = lifetime_s
        self.process: subprocess.Popen[bytes] | None = None
        self.bootstrap_servers = ""

    def __enter__(self) -> MockCluster:
        command = [sys.executable, str(Path(__file__).resolve()), "--brokers", str(self.brokers)]
        command += [f"--topic={name}:{count}" for name, count in self.topics.items()]
        command += [f"--rack={rack}" for rack in self.racks]
        command += ["--lifetime", str(self.lifetime_s)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as one at teardown
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT_S)
        line = self.process.stdout.readline().decode().strip() if ready else ""
        if not line:
            self.stop()
            raise RuntimeError(f"mock cluster did not start within {START_TIMEOUT_S} s")
        self.bootstrap_servers = line
        return self

    def stop(self) -> None:
        process = self.process
        if process is None:
            return
        self.process = None
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
