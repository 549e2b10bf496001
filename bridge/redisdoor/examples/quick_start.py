#!/usr/bin/python3
"""Cluster Serving quick start over the Redis door.

Pushes the three images next to this script to a running job the way the
original Python client (InputQueue.enqueue) does, then reads each result the
way OutputQueue.query does, and prints it.

Needs only python3-redis and python3-numpy (apt-get install python3-redis
python3-numpy); no pyarrow: records go as serde=stream JSON
{"instances":[{"<input>": "<base64 jpeg>"}]}.

    bin/cluster-serving start -c config.yaml          # with redisUrl set
    /usr/bin/python3 bridge/redisdoor/examples/quick_start.py --host localhost --port 6379 --job serving_stream
"""
import argparse
import base64
import json
import os
import sys
import time

import numpy as np
import redis


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="localhost", help="Redis host (default localhost)")
    p.add_argument("--port", type=int, default=6379, help="Redis port (default 6379)")
    p.add_argument("--job", default="serving_stream", help="jobName of the config (default serving_stream)")
    p.add_argument("--input", default="image", help="the model's image input name (default image)")
    p.add_argument("--timeout", type=float, default=60, help="seconds to wait for each result (default 60)")
    return p.parse_args()


def wait_for_memory(db):
    """Like InputQueue: do not write while Redis is above 60% of maxmemory."""
    while True:
        info = db.info("memory")
        maxmem = int(info.get("maxmemory", 0))
        if maxmem == 0 or int(info["used_memory"]) < 0.6 * maxmem:
            return
        print("redis is above 60% of maxmemory; waiting for the server to catch up", file=sys.stderr)
        time.sleep(1)


def enqueue(db, job, uri, instances):
    """InputQueue.enqueue(uri, ...) with serde=stream."""
    wait_for_memory(db)
    db.xadd(job, {"uri": uri, "data": json.dumps({"instances": instances}), "serde": "stream"})


def query(db, job, uri, timeout):
    """OutputQueue.query(uri): poll the result hash, then delete it."""
    key = "cluster-serving_" + job + ":" + uri
    deadline = time.time() + timeout
    while time.time() < deadline:
        res = db.hgetall(key)
        if b"value" in res:
            db.delete(key)
            return res[b"value"].decode()
        time.sleep(0.05)
    return None


def describe(value):
    """Render a result value for printing."""
    if value == "NaN":
        return "NaN (the record failed; the server log says why)"
    if value.startswith("[["):
        return value  # topN / pickTopN: [[class,score][class,score]...]
    try:  # a {"data": [...], "shape": [...]} tensor
        t = json.loads(value)
        a = np.asarray(t["data"], dtype=np.float32).reshape(t["shape"])
        top = np.argsort(-a.ravel())[:5]
        return "tensor shape %s, top classes %s" % (list(a.shape), [(int(i), float(a.ravel()[i])) for i in top])
    except (ValueError, KeyError, TypeError):
        pass
    return "Arrow tensor, %d base64 characters (decode with pyarrow)" % len(value)


def main():
    args = parse_args()
    db = redis.StrictRedis(host=args.host, port=args.port, db=0)
    try:  # what the client does; the server has usually created the group
        db.xgroup_create(args.job, "serving", id="$")
    except redis.exceptions.ResponseError:
        pass

    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")
    uris = []
    for name in sorted(os.listdir(folder)):
        if not name.lower().endswith((".jpeg", ".jpg", ".png")):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            b64 = base64.b64encode(f.read()).decode("ascii")
        uri = os.path.splitext(name)[0]
        enqueue(db, args.job, uri, [{args.input: b64}])
        uris.append(uri)
        print("enqueued %s" % uri)

    failed = 0
    for uri in uris:
        value = query(db, args.job, uri, args.timeout)
        if value is None:
            print("%s: no result after %gs (is the job running with redisUrl set?)" % (uri, args.timeout))
            failed += 1
            continue
        print("%s: %s" % (uri, describe(value)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
