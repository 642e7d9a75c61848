"""Files for Spark jobs on any Hadoop-compatible file system (local, HDFS, S3A, GCS...).

Local inputs are listed by the one data-file rule of :mod:`ktkbase.files`, as the Python engine
lists them; remote ones through Hadoop's FileSystem API on the driver with the same rule.
Result directories on Hadoop file systems follow :mod:`ktkbase.outputs` through
:class:`HadoopFileSystem`. Tasks read local files in place and remote ones from bytes staged in a
temporary local file, so the domain packages' readers (which take local paths) serve both.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktkbase.files import data_files, is_data_path
from ktkbase.outputs import LOCAL, protected_local_reason

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def hadoop_fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(FileSystem, Path) of the JVM for ``path``."""
    context: Any = spark.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)
    configuration = context._jsc.hadoopConfiguration()
    return hadoop_path.getFileSystem(configuration), hadoop_path


def local_name(uri: str) -> str | None:
    """The local file behind a ``file:`` URI or plain path; None for a remote URI."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    return None if "://" in uri else uri


def is_local(uri: str) -> bool:
    """A plain path (no scheme), written by the local writers; a ``file:`` URI, like every
    other URI, names an output directory written through Hadoop (inputs named by ``file:``
    URIs are still listed and read in place, see :func:`local_name`)."""
    return "://" not in uri and not uri.startswith("file:")


def list_inputs(
    spark: SparkSession, paths: Sequence[str], suffixes: tuple[str, ...]
) -> list[tuple[str, str]]:
    """(location to read, name to report) of every data file under ``paths``, by the one
    data-file rule of :mod:`ktkbase.files` (files as given, directories searched recursively,
    ``.x`` and ``_x`` entries skipped, sorted by path components within a directory, each file
    once even when two arguments reach it). Local files are listed as the Python engine lists
    them (reported as given, read by absolute path); others through Hadoop's FileSystem API.
    A missing path raises FileNotFoundError."""
    found: list[tuple[str, str]] = []
    for path in paths:
        local = local_name(path)
        if local is not None:
            found.extend(
                (os.path.abspath(name), str(name)) for name in data_files([local], suffixes)
            )
            continue
        fs, hadoop_path = hadoop_fs(spark, path)
        if not fs.exists(hadoop_path):
            raise FileNotFoundError(2, "No such file or directory", path)
        status = fs.getFileStatus(hadoop_path)
        if not status.isDirectory():
            uri = status.getPath().toString()
            found.append((uri, uri))
            continue
        root = status.getPath().toString().rstrip("/")
        listing = fs.listFiles(hadoop_path, True)
        in_directory = []
        while listing.hasNext():
            uri = listing.next().getPath().toString()
            if is_data_path(uri[len(root) :].strip("/").split("/"), suffixes):
                in_directory.append(uri)
        # sorted by path components, as ktkbase.files sorts local paths
        found.extend((uri, uri) for uri in sorted(in_directory, key=lambda uri: uri.split("/")))
    # each file once even when two arguments reach it, as the Python engine lists them
    unique: dict[str, tuple[str, str]] = {}
    for location, name in found:
        unique.setdefault(location, (location, name))
    return list(unique.values())


def list_files(spark: SparkSession, paths: Sequence[str], suffixes: tuple[str, ...]) -> list[str]:
    """Locations of the data files under ``paths`` (:func:`list_inputs`): absolute paths for
    local files, URIs for the others."""
    return [location for location, _ in list_inputs(spark, paths, suffixes)]


def check_local_inputs(paths: Sequence[str]) -> None:
    """Raise FileNotFoundError for a missing local input (before any JVM starts)."""
    for path in paths:
        local = local_name(path)
        if local is not None and not os.path.exists(local):
            raise FileNotFoundError(2, "No such file or directory", path)


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


class HadoopFileSystem:
    """:class:`ktkbase.outputs.FileSystem` over Hadoop's FileSystem API (HDFS, S3A, GCS,
    ``file:``...), so result directories on any of them follow ktk's output rules: staged
    beside the target, moved into place by rename, never replacing what ktk did not write.
    Hadoop has no atomic exchange of two directories (:meth:`exchange` is False): a previous
    result is renamed aside, the new one into place, then the old one deleted."""

    def __init__(self, spark: SparkSession) -> None:
        context: Any = spark.sparkContext
        self._jvm: Any = context._jvm
        self._configuration: Any = context._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        fs = hadoop_path.getFileSystem(self._configuration)
        fs.setWriteChecksum(False)  # no .crc files beside the results on local file systems
        return fs, hadoop_path

    def qualified(self, path: str) -> str:
        """``path`` as a full URI (scheme, authority, absolute path), without a trailing /."""
        fs, hadoop_path = self._fs(path)
        return str(fs.makeQualified(hadoop_path).toString()).rstrip("/")

    def exists(self, path: str) -> bool:
        fs, hadoop_path = self._fs(path)
        return bool(fs.exists(hadoop_path))

    def is_dir(self, path: str) -> bool:
        fs, hadoop_path = self._fs(path)
        return bool(fs.exists(hadoop_path) and fs.getFileStatus(hadoop_path).isDirectory())

    def children(self, path: str) -> list[str]:
        fs, hadoop_path = self._fs(path)
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(hadoop_path))

    def read_text(self, path: str) -> str | None:
        fs, hadoop_path = self._fs(path)
        try:
            if not fs.isFile(hadoop_path) or fs.getFileStatus(hadoop_path).getLen() > 1 << 20:
                return None
            stream = fs.open(hadoop_path)
            try:
                data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
            finally:
                stream.close()
            return bytes(data).decode("utf-8")
        except Exception:  # unreadable (Java or decoding errors): not a manifest ktk wrote
            return None

    def write_bytes(self, path: str, data: bytes) -> None:
        fs, hadoop_path = self._fs(path)
        stream = fs.create(hadoop_path, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def make_dirs(self, path: str) -> None:
        fs, hadoop_path = self._fs(path)
        if not fs.mkdirs(hadoop_path):
            raise OSError(f"could not create directory {path}")

    def rename(self, source: str, target: str) -> None:
        """Like ``os.rename``: a file at ``target`` is replaced (Hadoop's rename refuses an
        existing target, and would move a directory into an existing one: that is refused)."""
        fs, source_path = self._fs(source)
        _, target_path = self._fs(target)
        if fs.exists(target_path):
            if fs.getFileStatus(target_path).isDirectory():
                raise OSError(f"could not rename {source} to {target}: it exists")
            fs.delete(target_path, False)
        if not fs.rename(source_path, target_path):
            raise OSError(f"could not rename {source} to {target}")

    def exchange(self, first: str, second: str) -> bool:
        return False

    def delete_tree(self, path: str) -> None:
        fs, hadoop_path = self._fs(path)
        fs.delete(hadoop_path, True)

    def join(self, parent: str, name: str) -> str:
        return f"{parent.rstrip('/')}/{name}"

    def split(self, path: str) -> tuple[str, str]:
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        parent = hadoop_path.getParent()
        return ("" if parent is None else str(parent.toString())), str(hadoop_path.getName())

    def protected_reason(self, path: str, inputs: Sequence[str]) -> str | None:
        """Why ``path`` may never be replaced: the file system's root, or a target equal to or
        containing an input (compared as qualified URIs); local targets also get the local
        rules (home, current directory)."""
        target = self.qualified(path)
        if target.startswith("file:"):
            local = protected_local_reason(Path(target[len("file:") :]), [])
            if local is not None:
                return local
        fs, hadoop_path = self._fs(path)
        if fs.makeQualified(hadoop_path).getParent() is None:
            return "it is the root of its file system"
        for given in inputs:
            source = self.qualified(given)
            if source == target:
                return f"it is the input {given}"
            if source.startswith(target + "/"):
                return f"it contains the input {given}"
        return None

    def process_alive(self, host: str, pid: int) -> bool:
        return LOCAL.process_alive(host, pid)
