"""The error taxonomy as data (tree.yaml) and the classifier that walks it."""

from dbcrew.error_tree.classify import Classification, ErrorTree, load_tree

__all__ = ["Classification", "ErrorTree", "load_tree"]
