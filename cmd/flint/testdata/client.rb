# Drives Flint through redis-rb (Ruby's Redis client, Debian's ruby-redis),
# as a Ruby application would: its cluster client for keys, transactions,
# expiring keys and SCAN, and a plain client for WATCH and pub/sub.
#
# Usage: client.rb host:port[,host:port...] (the members of a group). It
# exits non-zero, with a message, at the first reply that is not what Redis
# would give; it prints "ok" when all are.
require "redis"

nodes = ARGV.fetch(0).split(",").map { |a| "redis://#{a}" }

def check(cond, what)
  abort("client.rb: #{what}") unless cond
end

c = Redis.new(cluster: nodes)
c.set("rb:k", "v")
check(c.get("rb:k") == "v", "get")

# A lock as applications take one: SET NX PX.
check(c.set("rb:lock", "me", nx: true, px: 10_000) == true, "set nx px")
check(c.set("rb:lock", "you", nx: true, px: 10_000) == false, "second set nx px")
check((1..10_000).cover?(c.pttl("rb:lock")), "pttl #{c.pttl("rb:lock")}")
c.set("rb:gone", "v", ex: 1)
check(c.ttl("rb:gone") == 1, "ttl")
check(c.persist("rb:gone") && c.ttl("rb:gone") == -1, "persist")
c.set("rb:short", "v", px: 50)
sleep 0.5
check(c.get("rb:short").nil? && c.exists?("rb:short") == false, "expired key read back")

# A transaction, in one slot (a hash tag), with a runtime error inside:
# the other commands apply, and redis-rb raises the error EXEC returned.
c.set("{rb}:s", "x")
begin
  c.multi do |tx|
    tx.incr("{rb}:n")
    tx.incrby("{rb}:n", 4)
    tx.incr("{rb}:s")
  end
  check(false, "multi raised no error")
rescue Redis::CommandError => e
  check(e.message == "ERR value is not an integer or out of range", "multi error #{e.message}")
end
check(c.get("{rb}:n") == "5", "the transaction's other commands did not apply")
check(c.multi { |tx| tx.incr("{rb}:n"); tx.get("{rb}:n") } == [6, "6"], "multi replies")

# A pipeline of many commands.
out = c.pipelined { |p| 100.times { |i| p.set("{rb}:p#{i}", i.to_s) } }
check(out == ["OK"] * 100, "pipelined sets")
check(c.mget(*(0...100).map { |i| "{rb}:p#{i}" }) == (0...100).map(&:to_s), "mget of the pipeline's keys")

# SCAN over a node, as redis-rb's scan_each walks it.
leader = nodes.find { |n| Redis.new(url: n).role[0] == "master" }
r = Redis.new(url: leader)
seen = r.scan_each(match: "{rb}:p*", count: 7).to_a
check(seen.sort == (0...100).map { |i| "{rb}:p#{i}" }.sort, "scan_each saw #{seen.size} keys")
check(r.info("server")["redis_version"] =~ /\A\d+\.\d+/, "info server")

# WATCH: a watched key changed by another client aborts EXEC (nil).
r.set("rb:w", "1")
r.watch("rb:w")
Redis.new(url: leader).set("rb:w", "2")
check(r.multi { |tx| tx.set("rb:w", "3") }.nil?, "watch did not abort")
check(r.get("rb:w") == "2", "aborted transaction applied")

# Pub/sub: a subscriber on a follower hears what the leader publishes.
follower = (nodes - [leader]).first
got = Queue.new
sub = Thread.new do
  s = Redis.new(url: follower)
  s.subscribe("rb:news") do |on|
    on.subscribe { got << :ready }
    on.message do |_, msg|
      got << msg
      s.unsubscribe
    end
  end
end
check(got.pop == :ready, "subscribe")
r.publish("rb:news", "hello")
Thread.new { sleep 10; got << :timeout }
check(got.pop == "hello", "message")
sub.join(10)
puts "ok"
