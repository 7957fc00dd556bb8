"""Where an input came from: what the metric card records about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .input_files import InputFile


@dataclass(frozen=True)
class Source:
    """An input file's path and the SHA-256 of its bytes as stored."""

    path: str
    sha256: str

    @classmethod
    def of(cls, file: InputFile) -> Source:
        return cls(file.path, file.sha256)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
