"""Doc ids packed as UTF-8 bytes end to end: a run read from a file keeps its 10M ids without 10M str objects.
See docs/bad-input.md."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class PackedIds:
    """Id ``i`` is ``blob[starts[i]:starts[i + 1]]`` decoded as UTF-8 (Arrow's large_string layout)."""

    blob: bytes
    starts: np.ndarray  # int64 [n + 1]

    def __len__(self) -> int:
        return len(self.starts) - 1

    def to_objects(self) -> np.ndarray:
        """Every id as a str, in an object array."""
        import pyarrow as pa

        array = pa.LargeStringArray.from_buffers(len(self), pa.py_buffer(self.starts), pa.py_buffer(self.blob))
        return np.asarray(array.to_numpy(zero_copy_only=False), dtype=object)

    def take(self, indices: np.ndarray) -> np.ndarray:
        """The ids at ``indices`` as strs (for a few: tie-breaking, error messages)."""
        s, blob = self.starts, self.blob
        return np.array([blob[s[i] : s[i + 1]].decode() for i in indices.tolist()], dtype=object)
