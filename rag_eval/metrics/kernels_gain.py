"""Kernels for graded gain measures beyond nDCG: g, bing, ndcg_rel, rndcg, rbp, rbp_resid, err, nerr.
"""

from __future__ import annotations
