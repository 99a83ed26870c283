"""Writes and reads keys through redis-py's RedisCluster, as an application
would, for TestRedisPyFailover: SET py<i> to i, then GET it back, for i from
0 to WRITES-1, one at a time, printing "ack <i> <time>" once both succeeded
(the time in seconds since the epoch).

It has no code of its own for MOVED, CLUSTERDOWN or a dead member: whatever
RedisCluster does not ride through ends the script with a traceback (and
status 1). Its only setting is the number of retries: redis-py's cluster
client retries a refused connection at once, reloading CLUSTER SLOTS each
time (about 4 ms a try here), so the count must cover the election that
follows a leader's death, a few hundred milliseconds at the test's 20 ms
raft tick; it does not sleep between such tries, whatever backoff it is
given (redis-py 8.1).

usage: rediscluster.py HOST:PORT[,HOST:PORT...] WRITES DEADLINE_SECONDS
"""

import sys
import time

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

RETRIES = 2000


def main():
    addrs, writes, deadline = sys.argv[1].split(","), int(sys.argv[2]), float(sys.argv[3])
    nodes = [ClusterNode(host, int(port)) for host, port in (a.rsplit(":", 1) for a in addrs)]
    print(f"redis-py {redis.__version__}", flush=True)
    rc = RedisCluster(startup_nodes=nodes,
                      retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.5), retries=RETRIES))
    end = time.monotonic() + deadline
    for i in range(writes):
        if time.monotonic() > end:
            sys.exit(f"only {i} of {writes} writes within {deadline} s")
        rc.set(f"py{i}", str(i))
        got = rc.get(f"py{i}")
        if got != str(i).encode():
            sys.exit(f"GET py{i} = {got!r} right after SET py{i} {i}")
        print(f"ack {i} {time.time():.6f}", flush=True)
    rc.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
