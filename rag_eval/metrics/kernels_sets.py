"""Kernels for the set measures (the whole ranking as a set): set_precision, set_relative_precision,
set_recall, set_map, set_f, utility, num_nonrel_judged_ret.
"""

from __future__ import annotations
