"""A third-party assignor that raises, installed as a real plugin: a zip holding the module and
its distribution metadata (entry point group ``ktk.assignors``), put on ``sys.path`` of this
process and, through ``addPyFile``, of Spark's workers."""

from __future__ import annotations

import zipfile
from pathlib import Path

NAME = "raising-plugin-for-tests"
MODULE = "ktk_raising_plugin"
SOURCE = """
from assignors.model import Assignment


class RaisingAssignor:
    name = "raising-plugin-for-tests"
    rebalance_protocol = "eager"

    def assign(self, group):
        if len(group.members) > 2:
            raise RuntimeError(f"cannot handle {len(group.members)} members")
        return Assignment.build([m.member_id for m in group.members],
                                {group.members[0].member_id: group.subscribed_partitions()})
"""


def build(directory: Path) -> Path:
    """The plugin as a zip in ``directory``."""
    path = directory / f"{MODULE}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{MODULE}.py", SOURCE)
        info = f"{MODULE}-1.0.dist-info"
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {MODULE}\nVersion: 1.0\n"
        )
        archive.writestr(
            f"{info}/entry_points.txt", f"[ktk.assignors]\n{NAME} = {MODULE}:RaisingAssignor\n"
        )
    return path
