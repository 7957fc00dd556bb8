"""Awaiting a coroutine from sync code, for the adapters and the model judges (docs/judges.md)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Await ``make()`` from sync code: on a fresh event loop, or, when this thread already runs one (a notebook),
    on a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(make))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(_awaited(make))).result()


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()
