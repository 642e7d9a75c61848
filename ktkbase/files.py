"""Which files under a directory are data: one rule for every lister, both engines included.

A directory is searched recursively; an entry whose name starts with ``.`` or ``_`` (hidden
files, ktk's staging and manifest, the ``_SUCCESS`` commit marker ktk and Spark write, Spark's
``_temporary``) is skipped, and so is everything below it; files ending in one of the given
suffixes are kept, sorted within each directory argument. A file named directly is always kept.

>>> is_data_path(("traces", "a.jsonl"), (".jsonl",))
True
>>> is_data_path(("_staging", "b.jsonl"), (".jsonl",))
False
>>> is_data_path((".hidden", "c.jsonl"), (".jsonl",)), is_data_path(("d.txt",), (".jsonl",))
(False, False)
>>> import tempfile
>>> with tempfile.TemporaryDirectory() as directory:
...     _ = (Path(directory) / "a.jsonl").write_text("")
...     [p.name for p in data_files([directory, Path(directory) / "a.jsonl"], (".jsonl",))]
['a.jsonl']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path


def is_hidden_name(name: str) -> bool:
    """Names every ktk lister skips inside a directory."""
    return name.startswith((".", "_"))


def is_data_path(relative_parts: Sequence[str], suffixes: tuple[str, ...]) -> bool:
    """Whether a file at ``relative_parts`` below a listed directory is a data file."""
    return (
        bool(relative_parts)
        and relative_parts[-1].endswith(suffixes)
        and not any(is_hidden_name(part) for part in relative_parts)
    )


def data_files(paths: Iterable[str | os.PathLike[str]], suffixes: tuple[str, ...]) -> list[Path]:
    """The data files named by ``paths``: files as given, directories searched recursively
    (see the module rule), each file once even when two arguments reach it. A missing path
    raises FileNotFoundError."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            in_directory: list[Path] = []
            for directory, subdirectories, files in os.walk(path):
                subdirectories[:] = sorted(d for d in subdirectories if not is_hidden_name(d))
                relative = Path(directory).relative_to(path).parts
                in_directory.extend(
                    Path(directory) / name
                    for name in files
                    if is_data_path((*relative, name), suffixes)
                )
            found.extend(sorted(in_directory))
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(2, "No such file or directory", str(path))
    seen: set[Path] = set()
    unique = []
    for file in found:
        key = file.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(file)
    return unique
