#!/usr/bin/env python3
"""tritonclient (built from github:triton-inference-server/client) against a running server.

Each check prints one line: "PASS <name>" or "FAIL <name>: <reason>". Exit status 1 if any failed.
Usage: check_tritonclient.py HTTP_HOST:PORT GRPC_HOST:PORT
"""
import asyncio
import contextlib
import queue
import sys
import traceback
import uuid

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from ensembles import BROKEN, ENSEMBLES

HTTP_URL, GRPC_URL = sys.argv[1], sys.argv[2]
TIMEOUT = 20.0
# What door.Extensions(repository=true) answers (bridge/door), Triton's names.
EXTENSIONS = {"model_repository", "model_configuration", "system_shared_memory",
              "binary_tensor_data", "statistics"}
RESULTS = []


def check(name):
    def wrap(fn):
        def run():
            try:
                fn()
                RESULTS.append((name, True, ""))
                print("PASS %s" % name, flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is a FAIL line
                reason = "%s: %s" % (type(e).__name__, str(e).replace("\n", " ")[:300])
                if isinstance(e, AssertionError):
                    reason = str(e).replace("\n", " ")[:300] or traceback.format_exc().splitlines()[-3]
                RESULTS.append((name, False, reason))
                print("FAIL %s: %s" % (name, reason), flush=True)
        run.__name__ = name
        CHECKS.append(run)
        return run
    return wrap


CHECKS = []


def http():
    return httpclient.InferenceServerClient(HTTP_URL, concurrency=16, connection_timeout=TIMEOUT,
                                            network_timeout=TIMEOUT)


def grpc():
    return grpcclient.InferenceServerClient(GRPC_URL)


def mod(p):
    return httpclient if p == "http" else grpcclient


def simple_inputs(p, binary=True, batch=1, dtype=np.int32):
    a = np.arange(16 * batch, dtype=dtype).reshape(batch, 16)
    b = np.ones((batch, 16), dtype=dtype)
    ins = []
    for n, v in (("INPUT0", a), ("INPUT1", b)):
        i = mod(p).InferInput(n, list(v.shape), np_to_triton_dtype(v.dtype))
        if p == "http":
            i.set_data_from_numpy(v, binary_data=binary)
        else:
            i.set_data_from_numpy(v)
        ins.append(i)
    return ins, a, b


def simple_outputs(p, binary=True):
    if p == "http":
        return [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")]
    return [grpcclient.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]


def assert_simple(res, a, b):
    o0, o1 = res.as_numpy("OUTPUT0"), res.as_numpy("OUTPUT1")
    assert o0 is not None and o1 is not None, "outputs missing: %s" % (res.get_response(),)
    assert np.array_equal(o0, a + b), "OUTPUT0 %s != INPUT0+INPUT1" % o0
    assert np.array_equal(o1, a - b), "OUTPUT1 %s != INPUT0-INPUT1" % o1


def call(p, c, method, *args, **kw):
    if p == "grpc":
        kw.setdefault("client_timeout", TIMEOUT)
    return getattr(c, method)(*args, **kw)


def config_of(p, c, model):
    """The model config as a dict with Triton's JSON field names; ints as ints."""
    if p == "http":
        return c.get_model_config(model)
    from google.protobuf.json_format import MessageToDict
    cfg = call(p, c, "get_model_config", model).config
    return _ints(MessageToDict(cfg, preserving_proto_field_name=True))


def _ints(v):
    if isinstance(v, dict):
        return {k: _ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_ints(x) for x in v]
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    return v


def stats_of(p, c, model=""):
    if p == "http":
        return c.get_inference_statistics(model)["model_stats"]
    from google.protobuf.json_format import MessageToDict
    s = call(p, c, "get_inference_statistics", model)
    return [_ints(x) for x in MessageToDict(s, preserving_proto_field_name=True,
                                            including_default_value_fields=True)["model_stats"]]


def counts(p, c, model):
    st = [s for s in stats_of(p, c, model) if s["name"] == model]
    assert st, "no model_stats entry named %r" % model
    s = st[0]
    inf = s.get("inference_stats", {})
    return (int(s.get("inference_count", 0)), int(s.get("execution_count", 0)),
            int(inf.get("success", {}).get("count", 0)), int(inf.get("fail", {}).get("count", 0)))


for P in ("http", "grpc"):
    C = http if P == "http" else grpc

    @check(P + ".live_ready")
    def _(p=P, C=C):
        c = C()
        assert call(p, c, "is_server_live") is True, "is_server_live not True"
        assert call(p, c, "is_server_ready") is True, "is_server_ready not True"
        assert call(p, c, "is_model_ready", "simple") is True, "is_model_ready(simple) not True"

    @check(P + ".model_ready_unknown_false")
    def _(p=P, C=C):
        r = call(p, C(), "is_model_ready", "no_such_model")
        assert r is False, "is_model_ready(no_such_model) = %r, want False" % r

    @check(P + ".server_metadata")
    def _(p=P, C=C):
        m = call(p, C(), "get_server_metadata")
        name = m["name"] if p == "http" else m.name
        assert name, "no server name"

    @check(P + ".server_metadata_extensions")
    def _(p=P, C=C):
        m = call(p, C(), "get_server_metadata")
        ext = set(m.get("extensions", []) if p == "http" else m.extensions)
        assert EXTENSIONS <= ext, "extensions %s lack %s" % (sorted(ext), sorted(EXTENSIONS - ext))

    @check(P + ".model_metadata")
    def _(p=P, C=C):
        m = call(p, C(), "get_model_metadata", "simple")
        if p == "grpc":
            from google.protobuf.json_format import MessageToDict
            m = _ints(MessageToDict(m, preserving_proto_field_name=True))
        assert m["name"] == "simple", m
        ins = {i["name"]: i for i in m["inputs"]}
        assert set(ins) == {"INPUT0", "INPUT1"}, m
        assert ins["INPUT0"]["datatype"] == "INT32", m
        assert [int(x) for x in ins["INPUT0"]["shape"]] == [-1, 16], "INPUT0 shape %s" % ins["INPUT0"]["shape"]

    @check(P + ".model_metadata_reshape_densenet")
    def _(p=P, C=C):
        # Triton reports the config's dims (max_batch_size 0, reshape not shown): data_0 [3,224,224].
        m = call(p, C(), "get_model_metadata", "densenet_onnx")
        shape = [int(x) for x in (m["inputs"][0]["shape"] if p == "http" else m.inputs[0].shape)]
        assert shape == [3, 224, 224], "data_0 shape %s, want config dims [3,224,224]" % shape

    @check(P + ".model_config")
    def _(p=P, C=C):
        c = C()
        cfg = config_of(p, c, "simple")
        assert cfg.get("name") == "simple", cfg
        assert cfg.get("platform") == "onnxruntime_onnx" or cfg.get("backend") == "onnxruntime", cfg
        assert cfg.get("max_batch_size") == 8, "max_batch_size %r" % cfg.get("max_batch_size")
        ins = {i["name"]: i for i in cfg.get("input", [])}
        assert ins.get("INPUT0", {}).get("data_type") == "TYPE_INT32", cfg.get("input")
        assert [int(d) for d in ins["INPUT0"]["dims"]] == [16], ins["INPUT0"]
        outs = {o["name"] for o in cfg.get("output", [])}
        assert outs == {"OUTPUT0", "OUTPUT1"}, outs

    @check(P + ".model_config_max_batch_size_0")
    def _(p=P, C=C):
        cfg = config_of(p, C(), "simple_nobatch")
        assert cfg.get("max_batch_size", 0) == 0, "max_batch_size %r" % cfg.get("max_batch_size")
        ins = {i["name"]: i for i in cfg.get("input", [])}
        assert [int(d) for d in ins["INPUT0"]["dims"]] == [-1, 16], ins["INPUT0"]

    @check(P + ".model_config_dynamic_batching")
    def _(p=P, C=C):
        cfg = config_of(p, C(), "simple_dyna")
        db = cfg.get("dynamic_batching")
        assert db is not None, "no dynamic_batching in config"
        assert int(db.get("max_queue_delay_microseconds", 0)) == 2000, db

    @check(P + ".model_config_reshape_densenet")
    def _(p=P, C=C):
        cfg = config_of(p, C(), "densenet_onnx")
        i = cfg["input"][0]
        assert [int(d) for d in i["dims"]] == [3, 224, 224], i
        assert [int(d) for d in i.get("reshape", {}).get("shape", [])] == [1, 3, 224, 224], i
        assert i.get("format") == "FORMAT_NCHW", i

    @check(P + ".infer_int32")
    def _(p=P, C=C):
        ins, a, b = simple_inputs(p)
        assert_simple(call(p, C(), "infer", "simple", ins, outputs=simple_outputs(p), request_id="r1"), a, b)

    if P == "http":
        @check("http.infer_int32_json")
        def _():
            ins, a, b = simple_inputs("http", binary=False)
            res = http().infer("simple", ins, outputs=simple_outputs("http", binary=False))
            assert_simple(res, a, b)

        @check("http.infer_int32_binary_in_json_out")
        def _():
            ins, a, b = simple_inputs("http", binary=True)
            assert_simple(http().infer("simple", ins, outputs=simple_outputs("http", False)), a, b)

    @check(P + ".infer_request_id")
    def _(p=P, C=C):
        ins, _, _ = simple_inputs(p)
        r = call(p, C(), "infer", "simple", ins, request_id="req-42").get_response()
        rid = r.get("id") if p == "http" else r.id
        assert rid == "req-42", "id %r" % rid

    @check(P + ".infer_fp32_densenet")
    def _(p=P, C=C):
        # Send what the model metadata declares (as perf_analyzer does) and check the values.
        c = C()
        m = call(p, c, "get_model_metadata", "densenet_onnx")
        shape = [int(x) for x in (m["inputs"][0]["shape"] if p == "http" else m.inputs[0].shape)]
        x = np.full(shape, 0.5, dtype=np.float32)
        i = mod(p).InferInput("data_0", shape, "FP32")
        i.set_data_from_numpy(x)
        out = call(p, c, "infer", "densenet_onnx", [i]).as_numpy("fc6_1")
        w = np.random.default_rng(1).standard_normal((1000, 3, 1, 1)).astype(np.float32)
        want = 0.5 * w.reshape(1000, 3).sum(axis=1)
        assert out is not None and out.size == 1000, "fc6_1 %r" % (None if out is None else out.shape)
        assert np.allclose(out.reshape(-1), want, rtol=1e-4, atol=1e-4), "fc6_1 values differ"

    @check(P + ".infer_fp32_densenet_config_shape")
    def _(p=P, C=C):
        # Triton: max_batch_size 0, dims [3,224,224], reshape [1,3,224,224] -> output dims [1000].
        x = np.full((3, 224, 224), 0.25, dtype=np.float32)
        i = mod(p).InferInput("data_0", [3, 224, 224], "FP32")
        i.set_data_from_numpy(x)
        out = call(p, C(), "infer", "densenet_onnx", [i]).as_numpy("fc6_1")
        assert out is not None and list(out.shape) == [1000], "fc6_1 shape %r, want [1000]" % (
            None if out is None else list(out.shape))

    for binary in ((True, False) if P == "http" else (True,)):
        @check(P + ".infer_bytes" + ("" if binary else "_json"))
        def _(p=P, C=C, binary=binary):
            a = np.array([[str(k).encode() for k in range(16)]], dtype=np.object_)
            b = np.array([[b"1"] * 16], dtype=np.object_)
            ins = []
            for n, v in (("INPUT0", a), ("INPUT1", b)):
                i = mod(p).InferInput(n, [1, 16], "BYTES")
                i.set_data_from_numpy(v, binary_data=binary) if p == "http" else i.set_data_from_numpy(v)
                ins.append(i)
            res = call(p, C(), "infer", "simple_string", ins, outputs=simple_outputs(p, binary))
            o0 = [int(s) for s in res.as_numpy("OUTPUT0").reshape(-1)]
            o1 = [int(s) for s in res.as_numpy("OUTPUT1").reshape(-1)]
            assert o0 == [k + 1 for k in range(16)] and o1 == [k - 1 for k in range(16)], (o0, o1)

    @check(P + ".infer_unknown_model_raises")
    def _(p=P, C=C):
        ins, _, _ = simple_inputs(p)
        try:
            call(p, C(), "infer", "no_such_model", ins)
        except InferenceServerException as e:
            assert "no_such_model" in str(e), "message does not name the model: %s" % e
            return
        raise AssertionError("no InferenceServerException")

    for algo in ("gzip", "deflate"):
        @check(P + ".infer_compression_" + algo)
        def _(p=P, C=C, algo=algo):
            ins, a, b = simple_inputs(p)
            if p == "http":
                res = http().infer("simple", ins, outputs=simple_outputs(p),
                                   request_compression_algorithm=algo, response_compression_algorithm=algo)
            else:
                res = grpc().infer("simple", ins, compression_algorithm=algo, client_timeout=TIMEOUT)
            assert_simple(res, a, b)

    @check(P + ".infer_async")
    def _(p=P, C=C):
        c = C()
        sent = []
        if p == "http":
            for k in range(8):
                ins, a, b = simple_inputs(p)
                sent.append((c.async_infer("simple", ins, request_id=str(k)), a, b))
            for req, a, b in sent:
                assert_simple(req.get_result(timeout=TIMEOUT), a, b)
            return
        q = queue.Queue()
        for k in range(8):
            ins, a, b = simple_inputs(p)
            c.async_infer("simple", ins, lambda result, error: q.put((result, error)), request_id=str(k), client_timeout=TIMEOUT)
        for _ in range(8):
            r, e = q.get(timeout=TIMEOUT)
            assert e is None, "async_infer error: %s" % e
            assert_simple(r, np.arange(16, dtype=np.int32).reshape(1, 16), np.ones((1, 16), np.int32))

    @check(P + ".statistics_all_models")
    def _(p=P, C=C):
        names = {s["name"] for s in stats_of(p, C())}
        assert {"simple", "densenet_onnx"} <= names, "model_stats names %s" % sorted(names)

    @check(P + ".statistics_match_requests")
    def _(p=P, C=C):
        c = C()
        i0, e0, s0, f0 = counts(p, c, "simple")
        n = 5
        for _ in range(n):
            ins, _, _ = simple_inputs(p)
            call(p, c, "infer", "simple", ins)
        ins, _, _ = simple_inputs(p, batch=3)
        call(p, c, "infer", "simple", ins)  # one request of batch 3
        i1, e1, s1, f1 = counts(p, c, "simple")
        assert s1 - s0 == n + 1, "success.count +%d, sent %d requests" % (s1 - s0, n + 1)
        assert i1 - i0 == n + 3, "inference_count +%d, want %d (batch sizes summed)" % (i1 - i0, n + 3)
        assert 1 <= e1 - e0 <= n + 1, "execution_count +%d for %d requests" % (e1 - e0, n + 1)
        assert f1 == f0, "fail.count changed %d -> %d" % (f0, f1)
        one = [s for s in stats_of(p, c, "simple") if s["name"] == "simple"][0]
        assert "batch_stats" in one, "no batch_stats"
        ist = one["inference_stats"]
        for k in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
            assert k in ist, "inference_stats lacks %s" % k

    @check(P + ".statistics_unknown_model_error")
    def _(p=P, C=C):
        try:
            stats_of(p, C(), "no_such_model")
        except InferenceServerException:
            return
        raise AssertionError("no error for statistics of an unknown model")

    @check(P + ".repository_index")
    def _(p=P, C=C):
        idx = call(p, C(), "get_model_repository_index")
        rows = idx if p == "http" else [{"name": m.name, "state": m.state} for m in idx.models]
        st = {r["name"]: r.get("state") for r in rows}
        assert st.get("simple") == "READY", "index %s" % rows

    @check(P + ".repository_unload_load")
    def _(p=P, C=C):
        c = C()
        call(p, c, "unload_model", "inception_onnx")
        assert call(p, c, "is_model_ready", "inception_onnx") is False, "still ready after unload"
        call(p, c, "load_model", "inception_onnx")
        assert call(p, c, "is_model_ready", "inception_onnx") is True, "not ready after load"

    @check(P + ".system_shared_memory")
    def _(p=P, C=C):
        c = C()
        tag = uuid.uuid4().hex[:8]
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        b = np.ones((1, 16), dtype=np.int32)
        nbytes = a.nbytes
        hin = shm.create_shared_memory_region("in_" + tag, "/in_" + tag, 2 * nbytes)
        hout = shm.create_shared_memory_region("out_" + tag, "/out_" + tag, 2 * nbytes)
        try:
            shm.set_shared_memory_region(hin, [a, b])
            call(p, c, "unregister_system_shared_memory")
            call(p, c, "register_system_shared_memory", "in_" + tag, "/in_" + tag, 2 * nbytes)
            call(p, c, "register_system_shared_memory", "out_" + tag, "/out_" + tag, 2 * nbytes)
            ins = []
            for k, n in enumerate(("INPUT0", "INPUT1")):
                i = mod(p).InferInput(n, [1, 16], "INT32")
                i.set_shared_memory("in_" + tag, nbytes, offset=k * nbytes)
                ins.append(i)
            outs = []
            for k, n in enumerate(("OUTPUT0", "OUTPUT1")):
                o = mod(p).InferRequestedOutput(n) if p == "grpc" else httpclient.InferRequestedOutput(n, binary_data=True)
                o.set_shared_memory("out_" + tag, nbytes, offset=k * nbytes)
                outs.append(o)
            call(p, c, "infer", "simple", ins, outputs=outs)
            o0 = shm.get_contents_as_numpy(hout, np.int32, [1, 16], offset=0)
            o1 = shm.get_contents_as_numpy(hout, np.int32, [1, 16], offset=nbytes)
            assert np.array_equal(o0, a + b) and np.array_equal(o1, a - b), "region holds %s %s" % (o0, o1)
            status = call(p, c, "get_system_shared_memory_status")
            names = ({r["name"] for r in status} if p == "http" else set(status.regions.keys()))
            assert {"in_" + tag, "out_" + tag} <= names, "status %s" % names
            call(p, c, "unregister_system_shared_memory", "in_" + tag)
            call(p, c, "unregister_system_shared_memory", "out_" + tag)
        finally:
            shm.destroy_shared_memory_region(hin)
            shm.destroy_shared_memory_region(hout)

    @check(P + ".cuda_shared_memory_refused")
    def _(p=P, C=C):
        try:
            call(p, C(), "get_cuda_shared_memory_status")
        except InferenceServerException as e:
            assert str(e), "empty message"
            return
        # An empty status is what Triton without GPUs answers, also acceptable.

    @check(P + ".batching_dynamic_batches")
    def _(p=P, C=C):
        _burst(p, C, "simple_dyna", want_batched=True)

    @check(P + ".batching_max_batch_size_0_never_batches")
    def _(p=P, C=C):
        _burst(p, C, "simple_nobatch", want_batched=False)


def _burst(p, C, model, want_batched):
    """Send 32 concurrent requests of batch 1; compare the model's execution and inference counts.
    The requests go out even when statistics fail, for the batch-size metric checks below."""
    c = C()
    try:
        i0, e0, _, _ = counts(p, c, model)
    except Exception as e:  # noqa: BLE001
        i0, stats_err = None, e
    n = 32
    if p == "http":
        # tritonclient.http's async_infer sends one request about every
        # 11 ms here (gevent greenlets, 2 busy cores): no two meet within
        # a 2 ms queue delay, at Triton's server either. The aio client
        # sends them at once.
        async def burst():
            ac = httpaio.InferenceServerClient(HTTP_URL)
            try:
                await asyncio.gather(*[ac.infer(model, simple_inputs(p)[0]) for _ in range(n)])
            finally:
                await ac.close()
        asyncio.run(burst())
    else:
        q = queue.Queue()
        for _ in range(n):
            c.async_infer(model, simple_inputs(p)[0], lambda result, error: q.put(error), client_timeout=TIMEOUT)
        errs = [q.get(timeout=TIMEOUT) for _ in range(n)]
        assert not any(errs), "errors: %s" % [e for e in errs if e][:1]
    if i0 is None:
        raise stats_err
    i1, e1, _, _ = counts(p, c, model)
    assert i1 - i0 == n, "inference_count +%d, sent %d" % (i1 - i0, n)
    if want_batched:
        assert e1 - e0 < n, "execution_count +%d for %d concurrent requests: no batch formed" % (e1 - e0, n)
    else:
        assert e1 - e0 == n, "execution_count +%d for %d requests, want one each" % (e1 - e0, n)


def batch_metric(model):
    """cluster_serving_batch_size_{sum,count} of model from the Prometheus endpoint (METRICS=host:port)."""
    import os
    import re
    import urllib.request
    url = "http://%s/metrics" % os.environ["METRICS"]
    text = urllib.request.urlopen(url, timeout=TIMEOUT).read().decode()
    got = {}
    for k in ("sum", "count"):
        m = re.search(r'^cluster_serving_batch_size_%s\{[^}]*model="%s"[^}]*\} (\S+)$' % (k, model), text, re.M)
        assert m, "no cluster_serving_batch_size_%s for model %s" % (k, model)
        got[k] = float(m.group(1))
    return got["sum"], got["count"]


@check("metrics.batch_size_dynamic_batching")
def _():
    s, n = batch_metric("simple_dyna")
    assert s > n, "simple_dyna: %d requests in %d runs: dynamic_batching formed no batch" % (s, n)


@check("metrics.batch_size_max_batch_size_0")
def _():
    s, n = batch_metric("simple_nobatch")
    assert s == n, "simple_nobatch: %d requests in %d runs: max_batch_size 0 batched" % (s, n)


@check("http.health_json_body")
def _():
    import json
    import urllib.request
    for path, key in (("/v2/health/live", "live"), ("/v2/health/ready", "ready")):
        body = urllib.request.urlopen("http://%s%s" % (HTTP_URL, path), timeout=TIMEOUT).read()
        assert body, "%s: empty body, want {\"%s\": true}" % (path, key)
        assert json.loads(body).get(key) is True, "%s: %s" % (path, body[:100])


@check("http.compression_bomb_413")
def _():
    import gzip
    import http.client
    body = gzip.compress(b" " * (64 << 20), 9)  # 64 MiB of JSON whitespace in ~64 KiB
    c = http.client.HTTPConnection(HTTP_URL, timeout=TIMEOUT)
    c.request("POST", "/v2/models/simple/infer", body=body,
              headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status == 413, "status %d, want 413 (body limit on the decompressed size)" % r.status


@check("http.response_compression_gzip")
def _():
    import gzip
    import http.client
    import json
    c = http.client.HTTPConnection(HTTP_URL, timeout=TIMEOUT)
    # batch 8: an answer of about 1 KB (the door leaves answers under 512 bytes uncompressed)
    req = {"inputs": [{"name": n, "datatype": "INT32", "shape": [8, 16], "data": list(range(1000, 1128))}
                      for n in ("INPUT0", "INPUT1")]}
    c.request("POST", "/v2/models/simple/infer", body=json.dumps(req),
              headers={"Accept-Encoding": "gzip", "Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    assert r.status == 200, "status %d" % r.status
    assert r.getheader("Content-Encoding") == "gzip", "Content-Encoding %r" % r.getheader("Content-Encoding")
    assert json.loads(gzip.decompress(data))["outputs"], "no outputs"


for P in ("http", "grpc"):
    @check(P + ".versioned_config_and_stats")
    def _(p=P):
        c = http() if p == "http" else grpc()
        if p == "http":
            assert c.get_model_config("simple", "1")["name"] == "simple"
            st = c.get_inference_statistics("simple", "1")["model_stats"]
        else:
            assert c.get_model_config("simple", "1", client_timeout=TIMEOUT).config.name == "simple"
            st = c.get_inference_statistics("simple", "1", client_timeout=TIMEOUT).model_stats
            st = [{"name": x.name, "version": x.version} for x in st]
        assert [(x["name"], x["version"]) for x in st] == [("simple", "1")], st


# ---- ensembles (make_repo.py writes them, ensembles.py says what they answer and run)


def ens_x(batch=2, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, (batch, 3)).astype(np.float32)


def ens_infer(p, c, model, x, binary=True):
    """Runs ensemble model on x and compares every output with numpy's answer (float64)."""
    i = mod(p).InferInput("IN", list(x.shape), "FP32")
    i.set_data_from_numpy(x, binary_data=binary) if p == "http" else i.set_data_from_numpy(x)
    want = ENSEMBLES[model]["outputs"]
    if p == "http":
        outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in want]
    else:
        outs = [grpcclient.InferRequestedOutput(n) for n in want]
    res = call(p, c, "infer", model, [i], outputs=outs)
    for n, f in want.items():
        got = res.as_numpy(n)
        assert got is not None, "%s: no output %s in %s" % (model, n, res.get_response())
        w = f(x.astype(np.float64))
        assert got.shape == w.shape, "%s.%s shape %s, want %s" % (model, n, got.shape, w.shape)
        assert np.allclose(got, w, rtol=1e-5, atol=1e-5), "%s.%s = %s, want %s (x = %s)" % (
            model, n, got.tolist(), w.tolist(), x.tolist())


def model_stats(p, c, model, version=""):
    """The statistics entry of (model, version) as a dict (Triton's JSON names, ints as ints)."""
    if p == "http":
        st = c.get_inference_statistics(model, version)["model_stats"]
    else:
        from google.protobuf.json_format import MessageToDict
        s = call(p, c, "get_inference_statistics", model, version)
        st = [_ints(x) for x in MessageToDict(s, preserving_proto_field_name=True,
                                              including_default_value_fields=True)["model_stats"]]
    st = [x for x in st if x["name"] == model and (not version or str(x["version"]) == version)]
    assert len(st) == 1, "statistics of %s version %r: %d entries %s" % (model, version, len(st), st)
    return st[0]


def stat_numbers(s):
    """What the checks compare of one model_stats entry: counts, and compute durations in ns."""
    inf = s.get("inference_stats", {})
    out = {"inference_count": int(s.get("inference_count", 0)),
           "execution_count": int(s.get("execution_count", 0))}
    for k in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        out[k + ".count"] = int(inf.get(k, {}).get("count", 0))
        out[k + ".ns"] = int(inf.get(k, {}).get("ns", 0))
    return out


def ens_stats_delta(p, model, k, batch):
    """Sends k requests of batch rows to ensemble model; returns the statistics delta of the ensemble
    and of each (composing model, version) it runs, keyed by (name, version)."""
    c = C_OF[p]()
    keys = [(model, "")] + list(ENSEMBLES[model]["runs"])
    before = {key: stat_numbers(model_stats(p, c, *key)) for key in keys}
    for j in range(k):
        ens_infer(p, c, model, ens_x(batch, seed=j))
    after = {key: stat_numbers(model_stats(p, c, *key)) for key in keys}
    return {key: {f: after[key][f] - before[key][f] for f in after[key]} for key in keys}


C_OF = {"http": http, "grpc": grpc}

for P in ("http", "grpc"):
    C = C_OF[P]

    @check(P + ".ensemble_ready")
    def _(p=P, C=C):
        c = C()
        want = {(m, ""): True for m in ENSEMBLES}
        want.update({("two_io", ""): True, ("scale", "1"): True, ("scale", "2"): True, ("scale", "3"): False})
        want.update({(m, ""): False for m in BROKEN})
        got = {key: call(p, c, "is_model_ready", *key) for key in want}
        bad = ["%s%s: %r" % (m, v and " v" + v, got[(m, v)]) for (m, v), w in want.items() if got[(m, v)] is not w]
        assert not bad, "is_model_ready wrong for: %s" % "; ".join(bad)

    @check(P + ".ensemble_metadata")
    def _(p=P, C=C):
        c = C()
        for model, e in ENSEMBLES.items():
            m = call(p, c, "get_model_metadata", model)
            if p == "grpc":
                from google.protobuf.json_format import MessageToDict
                m = _ints(MessageToDict(m, preserving_proto_field_name=True))
            assert m.get("platform") == "ensemble", "%s platform %r, want ensemble" % (model, m.get("platform"))
            ins = [(i["name"], i["datatype"], [int(d) for d in i["shape"]]) for i in m.get("inputs", [])]
            assert ins == [("IN", "FP32", [-1, 3])], "%s inputs %s" % (model, ins)
            outs = sorted((o["name"], o["datatype"], [int(d) for d in o["shape"]]) for o in m.get("outputs", []))
            assert outs == [(n, "FP32", [-1, 3]) for n in sorted(e["outputs"])], "%s outputs %s" % (model, outs)

    @check(P + ".ensemble_config")
    def _(p=P, C=C):
        c = C()

        def steps(model):
            cfg = config_of(p, c, model)
            assert cfg.get("platform") == "ensemble", "%s platform %r" % (model, cfg.get("platform"))
            assert cfg.get("max_batch_size") == 8, "%s max_batch_size %r" % (model, cfg.get("max_batch_size"))
            st = cfg.get("ensemble_scheduling", {}).get("step", [])
            return [(s.get("model_name"), int(s.get("model_version", 0))) for s in st], st
        got, _ = steps("diamond")
        assert got == [("two_io", -1)] * 4, "diamond steps %s" % got
        got, raw = steps("pinned")
        assert got == [("scale", 1), ("two_io", -1)], "pinned steps %s" % got
        assert raw[0].get("input_map") == {"X": "IN"} and raw[0].get("output_map") == {"Y": "T"}, raw[0]
        got, _ = steps("nested")
        assert got == [("diamond", -1), ("two_io", -1)], "nested steps %s" % got
        pol = config_of(p, c, "scale").get("version_policy", {})
        assert [int(v) for v in pol.get("specific", {}).get("versions", [])] == [1, 2], "scale version_policy %s" % pol

    for model in ENSEMBLES:
        @check("%s.ensemble_infer_%s" % (P, model))
        def _(p=P, C=C, model=model):
            c = C()
            for batch in (1, 3):
                ens_infer(p, c, model, ens_x(batch, seed=batch))

    if P == "http":
        @check("http.ensemble_infer_diamond_json")
        def _():
            ens_infer("http", http(), "diamond", ens_x(2), binary=False)

    @check(P + ".ensemble_infer_composing_versions")
    def _(p=P, C=C):
        # the versions the ensembles pin, asked directly: scale v1 doubles, v2 multiplies by 10
        c = C()
        x = ens_x(2)
        for v, k in (("1", 2.0), ("2", 10.0)):
            i = mod(p).InferInput("X", [2, 3], "FP32")
            i.set_data_from_numpy(x)
            y = call(p, c, "infer", "scale", [i], model_version=v).as_numpy("Y")
            assert y is not None and np.allclose(y, k * x, rtol=1e-6), "scale v%s: %s, want %s" % (v, y, k * x)

    @check(P + ".ensemble_infer_broken_refused")
    def _(p=P, C=C):
        c = C()
        for model in BROKEN:
            dtype = np.int32 if model == "broken_dtype" else np.float32
            i = mod(p).InferInput("IN", [1, 3], np_to_triton_dtype(np.dtype(dtype)))
            i.set_data_from_numpy(np.ones((1, 3), dtype=dtype))
            try:
                call(p, c, "infer", model, [i])
            except InferenceServerException as e:
                assert model in str(e), "%s: message does not name the model: %s" % (model, e)
                continue
            raise AssertionError("%s answered an inference" % model)

    @check(P + ".ensemble_repository_index")
    def _(p=P, C=C):
        idx = call(p, C(), "get_model_repository_index")
        rows = idx if p == "http" else [{"name": m.name, "version": m.version, "state": m.state,
                                         "reason": m.reason} for m in idx.models]
        bad = []
        for r in rows:
            name, state, reason = r["name"], r.get("state", ""), r.get("reason", "")
            if name in BROKEN:
                if state != "UNAVAILABLE" or BROKEN[name] not in reason.lower():
                    bad.append("%s: %s %r, want UNAVAILABLE with a reason naming %r" % (name, state, reason, BROKEN[name]))
            elif (name, r.get("version")) == ("scale", "3"):
                pass  # on disk, outside the version policy: Triton lists it or not
            elif name == "sched_warm_broken":
                pass  # a broken model_warmup: scheduling.py checks its reason
            elif state != "READY":
                bad.append("%s v%s: %s %r, want READY" % (name, r.get("version"), state, reason))
        listed = {(r["name"], r.get("version", "")) for r in rows}
        want = {(m, "1") for m in list(ENSEMBLES) + list(BROKEN) + ["two_io"]} | {("scale", "1"), ("scale", "2")}
        missing = sorted(want - listed)
        assert not bad and not missing, "; ".join(bad + ["not listed: %s" % missing] if missing else bad)

    for model in ENSEMBLES:
        @check("%s.ensemble_statistics_%s" % (P, model))
        def _(p=P, model=model):
            k, batch = 5, 2
            d = ens_stats_delta(p, model, k, batch)
            bad = []
            for (name, version), n in [((model, ""), 1)] + list(ENSEMBLES[model]["runs"].items()):
                got = d[(name, version)]
                for f, w in (("success.count", k * n), ("fail.count", 0), ("inference_count", k * n * batch),
                             ("execution_count", k * n)):
                    if got[f] != w:
                        bad.append("%s%s %s +%d, want +%d" % (name, version and " v" + version, f, got[f], w))
            assert not bad, "after %d requests of batch %d to %s: %s" % (k, batch, model, "; ".join(bad))

    @check(P + ".ensemble_statistics_pinned_version_only")
    def _(p=P):
        # pinned runs scale v1 only; pinned_latest runs v2 only
        c = C_OF[p]()
        before = {v: stat_numbers(model_stats(p, c, "scale", v))["success.count"] for v in ("1", "2")}
        for j in range(3):
            ens_infer(p, c, "pinned", ens_x(1, seed=j))
        ens_infer(p, c, "pinned_latest", ens_x(1))
        after = {v: stat_numbers(model_stats(p, c, "scale", v))["success.count"] for v in ("1", "2")}
        got = {v: after[v] - before[v] for v in after}
        assert got == {"1": 3, "2": 1}, "scale success +%s after 3 pinned (v1) and 1 pinned_latest (v2) requests, want {'1': 3, '2': 1}" % got

    @check(P + ".ensemble_statistics_compute_is_steps_sum")
    def _(p=P):
        # Triton (core ensemble_scheduler.cc): an ensemble's compute_input/infer/output durations are
        # the sums of its composing models' (perf_analyzer reads the composing models instead).
        k = 5
        d = ens_stats_delta(p, "diamond", k, 2)
        ens, step = d[("diamond", "")], d[("two_io", "")]
        bad = []
        for f in ("compute_input.ns", "compute_infer.ns", "compute_output.ns"):
            if abs(ens[f] - step[f]) > 0.05 * step[f] + 1000:
                bad.append("%s +%d, two_io's +%d" % (f, ens[f], step[f]))
        assert not bad, "diamond after %d requests: %s (want the sum of its steps')" % (k, "; ".join(bad))


@contextlib.contextmanager
def stream():
    """A gRPC client with an open stream whose (result, error) pairs land in a queue."""
    c = grpc()
    q = queue.Queue()
    c.start_stream(lambda result, error: q.put((result, error)))
    try:
        yield c, q
    finally:
        c.stop_stream()


@check("grpc.stream_infer")
def _():
    with stream() as (c, q):
        for k in range(10):
            ins, _, _ = simple_inputs("grpc")
            c.async_stream_infer("simple", ins, request_id="s%d" % k)
        ids = set()
        for _ in range(10):
            r, e = q.get(timeout=TIMEOUT)
            assert e is None, "stream error: %s" % e
            assert_simple(r, np.arange(16, dtype=np.int32).reshape(1, 16), np.ones((1, 16), np.int32))
            ids.add(r.get_response().id)
        assert ids == {"s%d" % k for k in range(10)}, "ids %s" % sorted(ids)


@check("grpc.stream_outlives_request_timeout")
def _():
    # perf_analyzer keeps each context's stream open for the whole sweep (minutes): the door's
    # per-request deadline (run.sh sets httpRequestTimeout: 5000) must not end a stream.
    import time
    with stream() as (c, q):
        for k in range(2):
            if k:
                time.sleep(7)
            ins, a, b = simple_inputs("grpc")
            c.async_stream_infer("simple", ins, request_id="late%d" % k)
            r, e = q.get(timeout=TIMEOUT)
            assert e is None, "stream error after %ds: %s" % (7 * k, e)
            assert_simple(r, a, b)


@check("grpc.stream_infer_error_in_band")
def _():
    with stream() as (c, q):
        ins, _, _ = simple_inputs("grpc")
        c.async_stream_infer("no_such_model", ins, request_id="bad")
        c.async_stream_infer("simple", ins, request_id="good")
        got = [q.get(timeout=TIMEOUT) for _ in range(2)]
        errs = [e for _, e in got if e is not None]
        oks = [r for r, e in got if e is None]
        assert len(errs) == 1 and len(oks) == 1, "want one error and one result, got %s" % got
        assert oks[0].get_response().id == "good", "the stream did not go on after an error"


def aio(name):
    """Registers coro(c) as check name; c is a fresh asyncio client of the check's protocol."""
    def wrap(coro):
        async def run():
            if name.startswith("http."):
                c = httpaio.InferenceServerClient(HTTP_URL)
            else:
                c = grpcaio.InferenceServerClient(GRPC_URL)
            try:
                await coro(c)
            finally:
                await c.close()

        @check(name)
        def _():
            asyncio.run(asyncio.wait_for(run(), TIMEOUT * 2))
        return coro
    return wrap


@aio("http.aio")
async def _(c):
    assert await c.is_server_live() and await c.is_server_ready(), "not live/ready"
    assert await c.is_model_ready("simple"), "simple not ready"
    assert (await c.get_model_metadata("simple"))["name"] == "simple"
    res = []
    for binary in (True, False):
        ins, a, b = simple_inputs("http", binary)
        res.append((c.infer("simple", ins, outputs=simple_outputs("http", binary)), a, b))
    for r, a, b in res:
        assert_simple(await r, a, b)


@aio("http.aio_config_stats")
async def _(c):
    assert (await c.get_model_config("simple")).get("max_batch_size") == 8
    assert (await c.get_inference_statistics("simple"))["model_stats"][0]["name"] == "simple"


@aio("grpc.aio")
async def _(c):
    assert await c.is_server_live() and await c.is_server_ready(), "not live/ready"
    assert await c.is_model_ready("simple"), "simple not ready"
    assert (await c.get_model_metadata("simple")).name == "simple"
    ins, a, b = simple_inputs("grpc")
    assert_simple(await c.infer("simple", ins), a, b)


@aio("grpc.aio_config_stats")
async def _(c):
    assert (await c.get_model_config("simple")).config.max_batch_size == 8
    assert (await c.get_inference_statistics("simple")).model_stats[0].name == "simple"


@aio("grpc.aio_stream")
async def _(c):
    async def reqs():
        for k in range(6):
            ins, _, _ = simple_inputs("grpc")
            yield {"model_name": "simple", "inputs": ins, "request_id": "a%d" % k}

    ids = set()
    async for r, e in c.stream_infer(reqs()):
        assert e is None, "stream error: %s" % e
        ids.add(r.get_response().id)
        if len(ids) == 6:
            break
    assert ids == {"a%d" % k for k in range(6)}, "ids %s" % sorted(ids)


if __name__ == "__main__":
    only = sys.argv[3:]
    for fn in CHECKS:
        if not only or any(o in fn.__name__ for o in only):
            fn()
    sys.exit(0 if all(ok for _, ok, _ in RESULTS) else 1)
