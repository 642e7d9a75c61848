"""Consumer-group assignment: the group model, the assignors, scoring and trace replay.

Pure Python (numpy where it pays); importable without Spark or a JVM.
"""

from assignors.model import Assignment, Group, Member, Topic, TopicPartition

__all__ = ["Assignment", "Group", "Member", "Topic", "TopicPartition"]
