"""Kernels that read the pool: infap (grade -1 is pooled but unjudged), unjudged, relstring; and num_q, runid.
"""

from __future__ import annotations
