"""Kernels for interpolated precision and cutoffs that are not ranks: iprec_at_recall, 11pt_avg, rprec_mult,
relative_precision; and gm_map, gm_bpref (per query AP and bpref; the geometric mean is the summary's).
"""

from __future__ import annotations
