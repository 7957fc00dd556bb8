"""Moved to :mod:`rag_eval.reports.fates` (docs/html-report.md).

This old path warns a DeprecationWarning and goes in a later release."""

from rag_eval._moved import moved_module

__getattr__ = moved_module(__name__, "rag_eval.reports.fates")
