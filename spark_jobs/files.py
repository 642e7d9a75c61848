"""Files for Spark jobs on any Hadoop-compatible file system (local, HDFS, S3A, GCS...).

Listing and committing go through Hadoop's FileSystem API on the driver, so the jobs take the
same paths Spark does. Tasks read local files in place and remote ones from bytes staged in a
temporary local file, so the domain packages' readers (which take local paths) serve both.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def hadoop_fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(FileSystem, Path) of the JVM for ``path``."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    configuration = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    return hadoop_path.getFileSystem(configuration), hadoop_path


def local_name(uri: str) -> str | None:
    """The local file behind a ``file:`` URI or plain path; None for a remote URI."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    return None if "://" in uri else uri


def list_files(spark: SparkSession, paths: Sequence[str], suffixes: tuple[str, ...]) -> list[str]:
    """Files under ``paths`` ending in one of ``suffixes``: files as given, directories searched
    recursively (hidden ``.x`` and ``_x`` entries skipped, sorted within a directory). A missing
    path raises FileNotFoundError."""
    found: list[str] = []
    for path in paths:
        fs, hadoop_path = hadoop_fs(spark, path)
        if not fs.exists(hadoop_path):
            raise FileNotFoundError(2, "No such file or directory", path)
        status = fs.getFileStatus(hadoop_path)
        if not status.isDirectory():
            found.append(status.getPath().toString())
            continue
        root = status.getPath().toString().rstrip("/")
        listing = fs.listFiles(hadoop_path, True)
        in_directory = []
        while listing.hasNext():
            uri = listing.next().getPath().toString()
            relative = uri[len(root) :].strip("/").split("/")
            if uri.endswith(suffixes) and not any(p.startswith((".", "_")) for p in relative):
                in_directory.append(uri)
        found.extend(sorted(in_directory))
    return found


@contextmanager
def readable(uri: str, content: bytes | None) -> Iterator[tuple[str, str]]:
    """(local path to read, name to report) for a file a task was given: a local file in
    place, a remote one as a temporary copy of ``content`` with the same file name."""
    local = local_name(uri)
    if local is not None:
        yield local, local
        return
    with tempfile.TemporaryDirectory(prefix="ktk-") as directory:
        staged = os.path.join(directory, uri.rsplit("/", 1)[-1])
        with open(staged, "wb") as handle:
            handle.write(content or b"")
        yield staged, uri


def listing(spark: SparkSession, uris: Sequence[str]) -> DataFrame:
    """A DataFrame of (path, content) with one row per file, spread over tasks: local files
    carry no content (tasks read them in place), remote ones carry their bytes, read by
    Spark's binaryFile source."""
    schema = "path string, content binary"
    local = [uri for uri in uris if local_name(uri) is not None]
    remote = [uri for uri in uris if local_name(uri) is None]
    parts = []
    if local:
        slices = max(1, min(len(local), 4 * spark.sparkContext.defaultParallelism))
        parts.append(
            spark.createDataFrame([(uri, None) for uri in local], schema).repartition(slices)
        )
    if remote:
        parts.append(spark.read.format("binaryFile").load(remote).select("path", "content"))
    if not parts:
        return spark.createDataFrame([], schema)
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def write_text(spark: SparkSession, path: str, text: str) -> None:
    fs, hadoop_path = hadoop_fs(spark, path)
    stream = fs.create(hadoop_path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def staging_path(final: str) -> str:
    """A sibling of ``final`` to write into before committing."""
    return f"{final.rstrip('/')}.tmp-{uuid.uuid4().hex[:8]}"


def commit(spark: SparkSession, staging: str, final: str) -> None:
    """Make ``staging`` appear as ``final`` in one rename (an old ``final`` is removed after)."""
    fs, final_path = hadoop_fs(spark, final)
    _, staged_path = hadoop_fs(spark, staging)
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    retired = None
    if fs.exists(final_path):
        retired = jvm.org.apache.hadoop.fs.Path(f"{final.rstrip('/')}.old-{uuid.uuid4().hex[:8]}")
        fs.rename(final_path, retired)
    parent = final_path.getParent()
    if parent is not None and not fs.exists(parent):
        fs.mkdirs(parent)
    if not fs.rename(staged_path, final_path):
        raise OSError(f"could not move {staging} to {final}")
    if retired is not None:
        fs.delete(retired, True)


def discard(spark: SparkSession, path: str) -> None:
    fs, hadoop_path = hadoop_fs(spark, path)
    if fs.exists(hadoop_path):
        fs.delete(hadoop_path, True)
