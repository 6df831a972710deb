"""Django's Redis cache, made to fail open: a Redis outage must not turn pages and writes into 500s.

The cache holds nothing that is not also somewhere else (shared renders of live charts, throttle
counters), so while Redis is away a read is a miss and a write is dropped, with one warning a minute.
Throttles therefore allow requests during an outage rather than refusing them all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)
T = TypeVar("T")
_WARN_EVERY_SECONDS = 60.0


class FailOpenRedisCache(RedisCache):
    _last_warning = float("-inf")

    def _tolerant(self, what: str, fallback: T, call: Callable[[], T]) -> T:
        try:
            return call()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            now = time.monotonic()
            if now - FailOpenRedisCache._last_warning >= _WARN_EVERY_SECONDS:
                FailOpenRedisCache._last_warning = now
                logger.warning("the cache (Redis) is unreachable; %s falls back without it: %s", what, exc)
            return fallback

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._tolerant("a read", default, lambda: super(FailOpenRedisCache, self).get(key, default, version))

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        return self._tolerant("a read", {}, lambda: super(FailOpenRedisCache, self).get_many(keys, version))

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._tolerant("a write", None, lambda: super(FailOpenRedisCache, self).set(key, value, timeout, version))

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._tolerant("a write", False, lambda: super(FailOpenRedisCache, self).add(key, value, timeout, version))

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        return self._tolerant("a write", list(data), lambda: super(FailOpenRedisCache, self).set_many(data, timeout, version))

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._tolerant("a write", False, lambda: super(FailOpenRedisCache, self).touch(key, timeout, version))

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        # A miss raises ValueError as Django's caches do; callers (throttles) treat it as a fresh counter.
        return self._tolerant("a write", 0, lambda: super(FailOpenRedisCache, self).incr(key, delta, version))

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._tolerant("a delete", False, lambda: super(FailOpenRedisCache, self).delete(key, version))

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._tolerant("a delete", None, lambda: super(FailOpenRedisCache, self).delete_many(keys, version))

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._tolerant("a read", False, lambda: super(FailOpenRedisCache, self).has_key(key, version))
