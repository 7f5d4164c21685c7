"""Response cache: identical calls in one scope get identical answers, also when they arrive at the same time.

    cache = ResponseCache(max_entries=200_000, sqlite_path="runs/x/sgls.sqlite")
    key = cache_key(scope="group:uid-17", tool_fingerprint=tool.fingerprint, arguments={"city": "Paris"})
    text = await cache.get_or_compute(key, produce)   # produce() -> (text, cacheable) runs once per key

The key is ``scope | tool fingerprint (name + schemas) | canonical arguments`` (key-sorted JSON), so argument order
and whitespace do not matter. Concurrent callers with the same key wait for the first one (in-flight coalescing),
across event loops and threads too. Only answers the producer marks cacheable are stored (successful simulations;
transient simulator failures are not). With ``sqlite_path`` entries are also written to sqlite (WAL mode) and read
back on a miss, so a resumed run sees the same world.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from typing import Any, Awaitable, Callable

from .toolset import canonical_json

logger = logging.getLogger(__name__)


def cache_key(scope: str, tool_fingerprint: str, arguments: Any) -> str:
    """Stable key of one call in one scope."""
    digest = hashlib.sha256(canonical_json(arguments).encode()).hexdigest()[:32]
    return f"{scope}|{tool_fingerprint}|{digest}"


class ResponseCache:
    """In-memory LRU (+ optional sqlite) with in-flight coalescing; thread-safe, usable from any event loop."""

    def __init__(self, max_entries: int = 200_000, sqlite_path: str | None = None):
        self.max_entries = int(max_entries)
        self._mem: OrderedDict[str, str] = OrderedDict()
        self._inflight: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()
        self.sqlite_path = sqlite_path
        self.stats = {"hits": 0, "misses": 0, "coalesced": 0, "sqlite_hits": 0, "stores": 0}
        if sqlite_path:
            self._open(sqlite_path)

    def _open(self, path: str) -> None:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS sgls_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db = db

    def get(self, key: str) -> str | None:
        """Memory, then sqlite; None on a miss (does not touch the hit/miss counters)."""
        with self._lock:
            value = self._mem.get(key)
            if value is not None:
                self._mem.move_to_end(key)
                return value
        if self._db is not None:
            with self._db_lock:
                row = self._db.execute("SELECT value FROM sgls_cache WHERE key = ?", (key,)).fetchone()
            if row is not None:
                self._remember(key, row[0])
                with self._lock:
                    self.stats["sqlite_hits"] += 1
                return row[0]
        return None

    def put(self, key: str, value: str) -> None:
        self._remember(key, value)
        if self._db is not None:
            with self._db_lock:
                self._db.execute("INSERT OR REPLACE INTO sgls_cache (key, value) VALUES (?, ?)", (key, value))
        with self._lock:
            self.stats["stores"] += 1

    def _remember(self, key: str, value: str) -> None:
        with self._lock:
            self._mem[key] = value
            self._mem.move_to_end(key)
            while len(self._mem) > self.max_entries:
                self._mem.popitem(last=False)

    async def get_or_compute(
        self, key: str, produce: Callable[[], Awaitable[tuple[Any, bool]]], encode=lambda v: v, decode=lambda s: s
    ) -> tuple[Any, str]:
        """Return ``(value, how)`` where how is "hit", "coalesced" or "miss".

        Args:
            produce: coroutine factory returning ``(value, cacheable)``; runs at most once per key at a time.
            encode / decode: value <-> stored string.
        """
        stored = self.get(key)
        if stored is not None:
            with self._lock:
                self.stats["hits"] += 1
            return decode(stored), "hit"
        with self._lock:
            fut = self._inflight.get(key)
            owner = fut is None
            if owner:
                fut = concurrent.futures.Future()
                self._inflight[key] = fut
                self.stats["misses"] += 1
            else:
                self.stats["coalesced"] += 1
        if not owner:
            return await asyncio.wrap_future(fut), "coalesced"
        try:
            value, cacheable = await produce()
        except BaseException as e:
            with self._lock:
                self._inflight.pop(key, None)
            fut.set_exception(e)
            fut.exception()  # mark retrieved: no "never retrieved" noise when nobody waited
            raise
        if cacheable:
            try:
                self.put(key, encode(value))
            except sqlite3.Error as e:  # a full disk must not stop training; the memory copy is kept
                logger.warning("sgls cache: sqlite write failed (%s); keeping the answer in memory only", e)
        with self._lock:
            self._inflight.pop(key, None)
        fut.set_result(value)
        return value, "miss"

    def __len__(self) -> int:
        with self._lock:
            return len(self._mem)

    def close(self) -> None:
        if self._db is not None:
            with self._db_lock:
                self._db.close()
            self._db = None
