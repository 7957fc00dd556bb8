"""Moved to :mod:`rag_eval.drivers.tuning` (docs/tuning.md).

This old path warns a DeprecationWarning and goes in a later release."""

from rag_eval._moved import moved_module

__getattr__ = moved_module(__name__, "rag_eval.drivers.tuning")
