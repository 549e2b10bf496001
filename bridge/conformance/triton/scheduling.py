#!/usr/bin/env python3
"""Scheduling through tritonclient (make_repo.py's sched_* models): priorities, max_queue_size,
queue timeouts (REJECT and DELAY), gRPC cancellation, the response cache and model_warmup, as Triton's config.pbtxt
and request parameters ask.

Each check prints one line: "PASS <name>[: figures]" or "FAIL <name>: <reason>".
Usage: scheduling.py HTTP_HOST:PORT GRPC_HOST:PORT [name filter...]
"""
import collections
import json
import statistics
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

HTTP_URL, GRPC_URL = sys.argv[1], sys.argv[2]
FILTER = sys.argv[3:]
X = np.random.rand(1, 512).astype(np.float32)
FAILED = []


def check(name, fn):
    if FILTER and not any(f in name for f in FILTER):
        return
    try:
        figures = fn()
        print("PASS %s%s" % (name, ": " + figures if figures else ""), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is a FAIL line
        reason = str(e).replace("\n", " ")[:300] or traceback.format_exc().splitlines()[-3]
        FAILED.append(name)
        print("FAIL %s: %s" % (name, reason), flush=True)


def http():
    return httpclient.InferenceServerClient(HTTP_URL, connection_timeout=60, network_timeout=60)


def infer(c, model, **kw):
    i = httpclient.InferInput("X", [1, 512], "FP32")
    i.set_data_from_numpy(X)
    t0 = time.perf_counter()
    c.infer(model, [i], **kw)
    return time.perf_counter() - t0


class Load:
    """n threads sending requests to model (at priority, 0: the default; no timeout) until
    stopped, or each `count` requests; it counts the answers by outcome."""

    def __init__(self, model, n, count=None, priority=0):
        self.model, self.count, self.stop, self.priority = model, count, False, priority
        self.outcomes = collections.Counter()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run) for _ in range(n)]
        for t in self.threads:
            t.start()

    def run(self):
        c, k = http(), 0
        while not self.stop and (self.count is None or k < self.count):
            k += 1
            try:
                infer(c, self.model, **({"priority": self.priority} if self.priority else {}))
                out = "200"
            except InferenceServerException as e:
                out = "%s %s" % (e.status(), e.message())
            with self.lock:
                self.outcomes[out] += 1

    def end(self):
        self.stop = self.count is None
        for t in self.threads:
            t.join()
        return self.outcomes


def priority():
    load = Load("sched_prio", 24)
    time.sleep(2)  # the queue fills
    c, hi, lo = http(), [], []
    try:
        for _ in range(20):
            hi.append(infer(c, "sched_prio", priority=1))
            lo.append(infer(c, "sched_prio", priority=2))
    finally:
        outcomes = load.end()
    h, l = statistics.median(hi), statistics.median(lo)
    assert set(outcomes) == {"200"}, "the low-priority load got %s" % dict(outcomes)
    assert h < 0.5 * l, "high-priority median %.1f ms is not below half the low-priority %.1f ms" % (1e3 * h, 1e3 * l)
    return "priority 1 median %.1f ms, priority 2 median %.1f ms (ratio %.2f), 24 callers at priority 2" % (1e3 * h, 1e3 * l, h / l)


def max_queue_size():
    load = Load("sched_qsize", 48, count=4)
    outcomes = load.end()
    refused = [o for o in outcomes if o != "200"]
    assert outcomes["200"] > 0, "nothing served: %s" % dict(outcomes)
    assert refused, "no request refused past max_queue_size 4 with 48 callers: %s" % dict(outcomes)
    for o in refused:
        assert o.startswith("503") and "maximum queue size" in o.lower(), "refused with %r, want 503 naming the queue size" % o
    return "%d served, %d refused %r" % (outcomes["200"], sum(outcomes[o] for o in refused), refused[0])


def timeout_reject():
    load = Load("sched_timeout", 16)
    time.sleep(1)
    c, outcomes = http(), collections.Counter()
    try:
        for _ in range(10):
            try:
                infer(c, "sched_timeout", timeout=1000)
                outcomes["200"] += 1
            except InferenceServerException as e:
                outcomes["%s %s" % (e.status(), e.message())] += 1
    finally:
        load.end()
    rejected = outcomes.get("503 Request timeout expired", 0)
    assert rejected > 0 and set(outcomes) <= {"200", "503 Request timeout expired"}, \
        "1 ms timeouts behind 16 callers: %s, want 503 Request timeout expired" % dict(outcomes)
    return "%d of 10 rejected with 503 Request timeout expired" % rejected


def timeout_delay():
    load = Load("sched_delay", 16)
    time.sleep(1)
    c = http()
    try:
        for _ in range(5):
            infer(c, "sched_delay", timeout=1000)  # raises on anything but 200
    finally:
        load.end()
    return ""


def stats(model):
    s = http().get_inference_statistics(model)["model_stats"][0]
    return int(s["inference_count"]), int(s["execution_count"])


def grpc_cancel():
    # The cancelled requests wait behind 16 callers of a model that runs each request alone:
    # cancelled while queued, not while they run.
    before = stats("sched_cancel")
    load = Load("sched_cancel", 16, count=2)
    time.sleep(0.3)
    g = grpcclient.InferenceServerClient(GRPC_URL)
    answered, futures = [], []
    for _ in range(10):
        i = grpcclient.InferInput("X", [1, 512], "FP32")
        i.set_data_from_numpy(X)
        futures.append(g.async_infer("sched_cancel", [i], callback=lambda result, error: answered.append(result is not None)))
    for f in futures:
        f.cancel()
    outcomes = load.end()
    time.sleep(1)
    after = stats("sched_cancel")
    ran, early = after[0] - before[0], sum(answered)  # early: answered before their cancel
    assert outcomes == {"200": 32}, "the 32 served requests: %s" % dict(outcomes)
    assert ran == 32 + early, "inference_count grew by %d: 32 served, %d cancelled gRPC requests answered before the cancel, %d cancelled while queued" % (ran, early, 10 - early)
    return "inference_count +%d for 32 served and 10 cancelled gRPC requests (%d of them answered before their cancel)" % (ran, early)


def parameters():
    g = grpcclient.InferenceServerClient(GRPC_URL)
    i = grpcclient.InferInput("X", [1, 512], "FP32")
    i.set_data_from_numpy(X)
    g.infer("sched_prio", [i], priority=1, timeout=10_000_000)
    # tritonclient refuses a priority that is no integer itself: sent as JSON.
    body = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 512], "data": X.ravel().tolist()}],
                       "parameters": {"priority": "high"}}).encode()
    req = urllib.request.Request("http://%s/v2/models/sched_prio/infer" % HTTP_URL, body, {"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as e:
        msg = e.read().decode()
        assert e.code == 400 and "priority" in msg, "priority \"high\": %d %s" % (e.code, msg)
        return ""
    raise AssertionError("priority \"high\" was accepted")


def cache():
    x = np.random.rand(1, 512).astype(np.float32)  # an input no run has seen
    g = grpcclient.InferenceServerClient(GRPC_URL)
    before = http().get_inference_statistics("sched_cache")["model_stats"][0]
    outs = []
    for door in ("http", "grpc", "http"):
        if door == "http":
            i = httpclient.InferInput("X", [1, 512], "FP32")
            i.set_data_from_numpy(x)
            outs.append(http().infer("sched_cache", [i], request_id=door).as_numpy("Y"))
        else:
            i = grpcclient.InferInput("X", [1, 512], "FP32")
            i.set_data_from_numpy(x)
            outs.append(g.infer("sched_cache", [i]).as_numpy("Y"))
    after = http().get_inference_statistics("sched_cache")["model_stats"][0]
    d = lambda k: int(after[k]) - int(before[k])  # noqa: E731
    hits = int(after["inference_stats"]["cache_hit"]["count"]) - int(before["inference_stats"]["cache_hit"]["count"])
    assert all(np.array_equal(outs[0], o) for o in outs), "a cached answer differs from the model's"
    assert d("execution_count") == 1 and hits == 2, "3 identical requests: execution_count +%d, cache hits +%d, want +1 and +2" % (d("execution_count"), hits)
    return "3 identical requests (HTTP, gRPC, HTTP): 1 execution, 2 cache hits"


def warmup():
    index = {m["name"]: m for m in http().get_model_repository_index()}
    assert index["sched_warm"].get("state") == "READY", "sched_warm: %s" % index["sched_warm"]
    broken = index["sched_warm_broken"]
    assert broken.get("state") == "UNAVAILABLE" and "x.bin" in broken.get("reason", ""), "sched_warm_broken: %s" % broken
    infer(http(), "sched_warm")
    return "broken: %s" % broken.get("reason")


for name, fn in [("sched.priority", priority), ("sched.max_queue_size", max_queue_size),
                 ("sched.timeout_reject", timeout_reject), ("sched.timeout_delay", timeout_delay),
                 ("sched.grpc_cancel", grpc_cancel), ("sched.parameters", parameters),
                 ("sched.cache", cache), ("sched.warmup", warmup)]:
    check(name, fn)
sys.exit(1 if FAILED else 0)
