"""Uses expiring keys through redis-py as applications do, for
TestRedisPyExpiry: SET with ex and px, EXPIRE, TTL, PERSIST, GETEX, and
redis-py's Lock, which takes a lock with SET NX PX. The lock is never
released by the script: Lock.release runs a Lua script, which Flint does not
have; it frees itself once its timeout passes, and the script takes it again
then. Any failed check ends the script with a traceback (status 1); it
prints "ok" at its end.

usage: redislock.py HOST:PORT
"""

import sys
import time

import redis


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port), socket_timeout=20)

    assert r.set("session", "data", ex=3600)
    assert 3590 <= r.ttl("session") <= 3600, r.ttl("session")
    assert r.expire("session", 7200)
    assert 7190_000 <= r.pttl("session") <= 7200_000, r.pttl("session")
    assert not r.expire("session", 60, gt=True)
    assert r.persist("session")
    assert r.ttl("session") == -1
    assert r.ttl("nokey") == -2
    assert r.set("cache", "x", px=60_000)
    assert r.getex("cache", ex=600) == b"x"
    assert 590 <= r.ttl("cache") <= 600

    first = r.lock("resource", timeout=0.2)
    assert first.acquire(blocking=False)
    held = time.monotonic()
    second = r.lock("resource", timeout=5, sleep=0.01)
    assert not second.acquire(blocking=False)
    # Blocking: redis-py retries SET NX PX until the first lock's key expires.
    assert second.acquire(blocking_timeout=15)
    assert time.monotonic() - held >= 0.2
    assert r.get("resource") == second.local.token
    print("ok")


if __name__ == "__main__":
    main()
