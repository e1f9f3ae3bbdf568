"""redis-py against a server: set, get, delete, a pipeline, a
transaction, walking the keys (SCAN, KEYS, RANDOMKEY), times to live, and
hashes, lists (blocking pops included), sets and sorted sets, with the
client's default settings and with protocol=2.

Usage: redis_py_client.py PORT. Exits non-zero with the failure printed.
"""
import sys

import redis

port = int(sys.argv[1])
for protocol in (None, 2):
    kwargs = {} if protocol is None else {"protocol": protocol}
    r = redis.Redis(host="127.0.0.1", port=port, **kwargs)
    # redis-py 8's default connection speaks RESP3 (it sends HELLO 3).
    expected = 3 if protocol is None else protocol
    info = r.client_info()
    assert int(info["resp"]) == expected, (protocol, info)
    assert info["lib-name"].startswith("redis-py"), info
    assert r.ping() is True
    assert r.set("py:k", b"v\x00\r\n") is True
    assert r.get("py:k") == b"v\x00\r\n"
    assert r.get("py:missing") is None
    assert r.exists("py:k", "py:missing") == 1
    assert r.delete("py:k", "py:missing") == 1
    assert r.get("py:k") is None
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"py:{i}", str(i))
    pipe.get("py:7")
    pipe.mget("py:1", "py:2", "py:nope")
    replies = pipe.execute()
    assert replies[:100] == [True] * 100, replies[:100]
    assert replies[100] == b"7", replies[100]
    assert replies[101] == [b"1", b"2", None], replies[101]
    tx = r.pipeline(transaction=True)
    tx.set("py:tx1", "a").set("py:tx2", "b").get("py:tx1")
    assert tx.execute() == [True, True, b"a"]
    with r.pipeline() as watched:
        watched.watch("py:tx1")
        watched.multi()
        watched.set("py:tx1", "c")
        assert watched.execute() == [True]
    assert r.get("py:tx1") == b"c"
    assert r.client_setname("py-client") is True
    assert r.client_getname() in ("py-client", b"py-client")
    config = r.config_get("databases")
    assert config in ({"databases": "1"}, {b"databases": b"1"}), config
    assert r.dbsize() >= 102
    numbered = {f"py:{i}".encode() for i in range(100)}
    assert set(r.scan_iter(match="py:[0-9]*", count=7)) == numbered
    assert set(r.scan_iter(match="py:[0-9]*", _type="string")) == numbered
    assert list(r.scan_iter(match="py:[0-9]*", _type="list")) == []
    assert set(r.keys("py:[0-9]*")) == numbered
    assert r.keys("py:nope*") == []
    key = r.randomkey()
    assert key is not None and r.exists(key) == 1, key
    assert r.set("py:ttl", "v", ex=100) is True
    assert 99 <= r.ttl("py:ttl") <= 100
    assert r.expire("py:ttl", 50, gt=True) is False
    assert r.expire("py:ttl", 50, lt=True) is True
    assert 49_000 <= r.pttl("py:ttl") <= 50_000
    assert r.expireat("py:ttl", 4102444800) is True
    assert r.expiretime("py:ttl") == 4102444800
    assert r.persist("py:ttl") is True and r.ttl("py:ttl") == -1
    assert r.setex("py:ttl", 100, "w") is True
    assert r.getex("py:ttl", persist=True) == b"w"
    assert r.ttl("py:ttl") == -1 and r.ttl("py:gone") == -2
    assert r.set("py:short", "v", px=1) is True
    while r.pttl("py:short") != -2:
        pass
    assert r.get("py:short") is None and r.exists("py:short") == 0
    # The data types, as a program would use them.
    r.delete("py:h", "py:l", "py:s", "py:z")
    assert r.hset("py:h", mapping={"name": "ada", "visits": 1}) == 2
    assert r.hincrby("py:h", "visits", 2) == 3
    assert r.hgetall("py:h") == {b"name": b"ada", b"visits": b"3"}
    assert r.hget("py:h", "name") == b"ada" and r.hlen("py:h") == 2
    assert r.rpush("py:l", "a", "b", "c") == 3
    assert r.lpop("py:l") == b"a" and r.lrange("py:l", 0, -1) == [b"b", b"c"]
    assert r.blpop(["py:l"], timeout=1) == (b"py:l", b"b")
    assert r.sadd("py:s", "x", "y", "x") == 2
    assert r.smembers("py:s") == {b"x", b"y"} and r.sismember("py:s", "y")
    assert r.zadd("py:z", {"low": 1, "high": 10.5}) == 2
    assert r.zincrby("py:z", 2, "low") == 3.0
    assert r.zrange("py:z", 0, -1, withscores=True) == [(b"low", 3.0), (b"high", 10.5)]
    assert r.zrevrange("py:z", 0, 0) == [b"high"]
    assert r.bzpopmin("py:z", timeout=1) == (b"py:z", b"low", 3.0)
    assert r.type("py:h") == b"hash" and r.type("py:z") == b"zset"
    assert set(r.scan_iter(match="py:*", _type="set")) == {b"py:s"}
    try:
        r.get("py:h")
        raise AssertionError("GET of a hash answered")
    except redis.ResponseError as e:
        assert str(e).startswith("WRONGTYPE"), e
    r.close()
print("redis-py: ok")
