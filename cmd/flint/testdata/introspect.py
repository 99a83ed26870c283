"""Reads Flint's introspection through redis-py's own parsers.

Usage: introspect.py host:port. It exits non-zero, with a message, at the
first reply redis-py cannot parse or that lacks what redis-py's users
read; it prints "ok" when all are as expected.
"""
import sys

import redis
from redis._parsers.commands import CommandsParser

host, port = sys.argv[1].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port), protocol=2, decode_responses=True)


def check(cond, what):
    if not cond:
        sys.exit("introspect.py: " + what)


r.set("py:k", "v")
r.get("py:k")
info = r.info("everything")  # parse_info: numbers become ints and floats
for field in ("redis_version", "connected_clients", "used_memory", "total_commands_processed",
              "role", "connected_slaves", "used_cpu_sys", "cluster_enabled"):
    check(field in info, "INFO lacks %s: %r" % (field, sorted(info)))
check(info["role"] == "master", "role %r" % info["role"])
check(isinstance(info["used_cpu_user"], float), "used_cpu_user %r" % info["used_cpu_user"])
check(info["db0"]["keys"] >= 1, "db0 %r" % info["db0"])
check(info["cmdstat_get"]["calls"] >= 1, "cmdstat_get %r" % info.get("cmdstat_get"))
check(r.info("commandstats")["cmdstat_set"]["calls"] >= 1, "INFO commandstats")

r.client_setname("py-introspect")
me = [c for c in r.client_list() if c["name"] == "py-introspect"]
check(len(me) == 1 and me[0]["cmd"] == "client|list" and me[0]["db"] == "0", "client_list %r" % me)
check(r.client_info()["name"] == "py-introspect", "client_info")
check(r.client_list(client_id=[me[0]["id"]])[0]["id"] == me[0]["id"], "client_list(client_id=...)")

check(r.config_set("slowlog-log-slower-than", 0), "config_set")
r.slowlog_reset()
r.echo("py:slow")
entries = r.slowlog_get(10)
check(any(e["command"] in ("ECHO py:slow", b"ECHO py:slow") for e in entries), "slowlog_get %r" % entries)
check(r.slowlog_len() >= 1, "slowlog_len")
r.config_set("slowlog-log-slower-than", 10000)
check(r.config_get("maxclients")["maxclients"].isdigit(), "config_get")

cmds = r.command()  # parse_command: every command's flags and key positions
check(cmds["get"]["arity"] == 2 and cmds["get"]["first_key_pos"] == 1, "command get %r" % cmds.get("get"))
check(r.command_getkeys("MSET", "a", "1", "b", "2") == ["a", "b"], "command_getkeys")
check(r.command_count() == len(cmds), "command_count %d, command %d" % (r.command_count(), len(cmds)))
check(r.memory_usage("py:k") >= 3, "memory_usage")

# RedisCluster finds a command's keys with this parser, from COMMAND's key
# positions, and a subcommand's (MEMORY USAGE) from its subcommands.
parser = CommandsParser(r)
for args, want in ((("MSET", "a", "1", "b", "2"), ["a", "b"]), (("MEMORY USAGE", "py:k"), ["py:k"]),
                   (("GET", "py:k"), ["py:k"]), (("CLIENT", "LIST"), None)):
    got = parser.get_keys(r, *args)
    check(got == want, "CommandsParser.get_keys%r = %r, want %r" % (args, got, want))
check(r.lastsave() is not None, "lastsave")
print("ok")
