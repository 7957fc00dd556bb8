"""The demo's questions, judgements and pooling record (package data, read with importlib.resources)."""

__all__: list[str] = []
