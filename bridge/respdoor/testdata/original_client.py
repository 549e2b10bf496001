"""The original Cluster Serving Python client's Redis calls, as
InputQueue.enqueue, OutputQueue.query and OutputQueue.dequeue make them
(redis-py, Debian's python3-redis), for respdoor's tests.

The payloads come ready-made: the data field InputQueue.enqueue(uri,
t=ndarray) writes is base64 of an Arrow stream made by pyarrow, which
Debian does not package; the tests pass the real pyarrow payloads of
infer/testdata/fixtures.

stdin: {"port": P, "records": [{"job": J, "uri": U, "fields": {...}}],
        "query": [[J, U], ...], "dequeue": J, "password": optional}
stdout: {"query": {U: value}, "dequeue": {U: value}}
"""
import json
import sys
import time

import redis


def enqueue(db, job, uri, fields):
    """InputQueue.__enqueue_data: refuse while Redis is above 60% of
    maxmemory, then XADD; the original prints and drops the record on any
    error (here: raise, so that the test sees it)."""
    while True:
        inf = db.info()
        if inf["maxmemory"] == 0 or inf["used_memory"] < 0.6 * inf["maxmemory"]:
            break
        time.sleep(0.1)
    db.xadd(job, dict(fields, uri=uri))


def query(db, job, uri, timeout=60):
    """OutputQueue.query: poll HGETALL, DEL once read."""
    key = "cluster-serving_%s:%s" % (job, uri)
    for _ in range(int(timeout / 0.02)):
        value = db.hgetall(key).get(b"value")
        if value is not None:
            db.delete(key)
            return value.decode("utf-8")
        time.sleep(0.02)
    raise TimeoutError("no result for " + key)


def dequeue(db, job):
    """OutputQueue.dequeue: KEYS, HGETALL each, DEL each."""
    decoded = {}
    for res in db.keys("cluster-serving_" + job + ":*"):
        key = res.decode("utf-8")
        res_dict = db.hgetall(key)
        decoded[key.split(":", 1)[1]] = res_dict[b"value"].decode("utf-8")
        db.delete(key)
    return decoded


def main():
    spec = json.load(sys.stdin)
    db = redis.StrictRedis(host="127.0.0.1", port=spec["port"], db=0, password=spec.get("password"))
    for job in {r["job"] for r in spec["records"]}:
        try:  # InputQueue.__init__
            db.xgroup_create(job, "serving")
        except redis.exceptions.ResponseError:
            pass
    for r in spec["records"]:
        enqueue(db, r["job"], r["uri"], r["fields"])
    out = {"query": {}, "dequeue": {}}
    for job, uri in spec["query"]:
        out["query"][uri] = query(db, job, uri)
    want = len([r for r in spec["records"] if r["job"] == spec["dequeue"]])
    deadline = time.time() + 60
    while len(out["dequeue"]) < want and time.time() < deadline:
        out["dequeue"].update(dequeue(db, spec["dequeue"]))
        time.sleep(0.05)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
