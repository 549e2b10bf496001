#!/usr/bin/env python3
"""perf_analyzer's call sequence (github:triton-inference-server/perf_analyzer at 263c5f6), replayed.

For when the perf_analyzer binary is not built. Read from its source: perf_analyzer.cc (start-up),
model_parser.cc (what it reads of metadata and config), inference_profiler.cc (server extensions,
statistics around each window, DetermineStatsModelVersion), client_backend/triton/triton_client_backend.cc
(how gRPC answers become JSON, ParseStatistics, UnregisterAllSharedMemory), infer_context.cc (async/stream
responses matched by request id), infer_data_manager_shm.cc (regions), and the C++ client library's
http_client.cc (headers, request JSON). One line per check: PASS/FAIL name: reason.
Usage: pa_sequence.py HTTP_HOST:PORT GRPC_HOST:PORT
"""
import http.client
import json
import mmap
import os
import queue
import struct
import sys
import threading
import time

import grpc
import numpy as np
from google.protobuf.json_format import MessageToJson
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg

HTTP_HP, GRPC_HP = sys.argv[1], sys.argv[2]
MODEL = "simple"
WINDOW = 1.0  # seconds, as --measurement-interval 1000
NOSTATS = os.environ.get("PA_SEQ_NO_STATS") == "1"  # self-test of the load path on a server without stats
OK = []


class Fail(Exception):
    pass



def run_window(c, work):
    """Runs c callers of work(t, stop, counts, errors) for WINDOW seconds, as
    perf_analyzer's concurrency mode does, and returns the requests they sent."""
    stop, counts, errors = threading.Event(), [0] * c, []
    ts = [threading.Thread(target=work, args=(t, stop, counts, errors)) for t in range(c)]
    for t in ts:
        t.start()
    time.sleep(WINDOW)
    stop.set()
    for t in ts:
        t.join(30)
    if errors:
        raise Fail("concurrency %d: %s" % (c, errors[0]))
    return sum(counts)

def report(name, fn):
    try:
        note = fn()
        OK.append(True)
        print("PASS %s%s" % (name, " (%s)" % note if note else ""), flush=True)
    except Exception as e:  # noqa: BLE001
        OK.append(False)
        msg = str(e) if isinstance(e, Fail) else "%s: %s" % (type(e).__name__, e)
        print("FAIL %s: %s" % (name, msg.replace("\n", " ")[:300]), flush=True)


# ---- transport: HTTP as libcurl sends it; gRPC answers turned to JSON as the C++ backend does


def http_call(method, path, body=None, headers=None, conn=None):
    c = conn or http.client.HTTPConnection(HTTP_HP, timeout=20)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    if r.status != 200:
        raise Fail("%s %s -> %d %s" % (method, path, r.status, data[:200].decode(errors="replace")))
    return data


def http_json(method, path, body=None):
    data = http_call(method, path, body)
    return json.loads(data) if data else {}


_channel = None


def stub():
    global _channel
    if _channel is None:
        _channel = grpc.insecure_channel(GRPC_HP, options=[("grpc.max_receive_message_length", 2**31 - 1)])
    return pbg.GRPCInferenceServiceStub(_channel)


def as_json(msg):
    # MessageToJsonString(preserve_proto_field_names, always_print_primitive_fields), then rapidjson.
    return json.loads(MessageToJson(msg, preserving_proto_field_name=True, including_default_value_fields=True))


def metadata(proto):
    if proto == "http":
        return http_json("GET", "/v2/models/%s" % MODEL)
    return as_json(stub().ModelMetadata(pb.ModelMetadataRequest(name=MODEL), timeout=20))


def config(proto, model=MODEL, version=""):
    if proto == "http":
        return http_json("GET", "/v2/models/%s%s/config" % (model, version and "/versions/" + version))
    return as_json(stub().ModelConfig(pb.ModelConfigRequest(name=model, version=version), timeout=20))["config"]


def extensions(proto):
    if proto == "http":
        return set(http_json("GET", "/v2")["extensions"])
    return set(stub().ServerMetadata(pb.ServerMetadataRequest(), timeout=20).extensions)


def statistics(proto, model=MODEL):
    """One model's statistics; model "" asks for every model's (an ensemble's GetServerSideStatus)."""
    if proto == "http":
        return http_json("GET", "/v2/models/%sstats" % (model and model + "/"))
    return as_json(stub().ModelStatistics(pb.ModelStatisticsRequest(name=model), timeout=20))


# ---- ModelParser::InitTriton and DetermineSchedulerType


def parse_model(proto):
    md, cfg = metadata(proto), config(proto)
    if not isinstance(md.get("name"), str):
        raise Fail("metadata has no string name")
    for k in ("model_transaction_policy", "response_cache"):
        if k in cfg and not isinstance(cfg[k], dict):
            raise Fail("config %s is %r: perf_analyzer reads %s[...] of it as an object" % (k, cfg[k], k))
    if "model_transaction_policy" in cfg and not isinstance(cfg["model_transaction_policy"].get("decoupled"), bool):
        raise Fail("model_transaction_policy.decoupled is not a bool: %r" % cfg["model_transaction_policy"])
    if cfg["model_transaction_policy"].get("decoupled") if "model_transaction_policy" in cfg else False:
        raise Fail("model is decoupled: perf_analyzer would need --async --streaming")
    if "response_cache" in cfg and not isinstance(cfg["response_cache"].get("enable"), bool):
        raise Fail("response_cache.enable is not a bool: %r" % cfg["response_cache"])
    for k in ("sequence_batching", "ensemble_scheduling"):
        if k in cfg:
            raise Fail("config has %s (%r): perf_analyzer would treat simple as a %s model"
                       % (k, cfg[k], "sequence" if k[0] == "s" else "ensemble"))
    if cfg.get("platform") == "ensemble":
        raise Fail("platform ensemble")
    mbs = cfg.get("max_batch_size", 0)
    mbs = int(mbs) if isinstance(mbs, (int, str)) else None
    if mbs is None:
        raise Fail("max_batch_size is %r" % cfg.get("max_batch_size"))
    tensors = {}
    for kind in ("inputs", "outputs"):
        for t in md.get(kind, []):
            shape = [int(d) for d in t["shape"]]
            if mbs > 0:
                if not shape or shape[0] != -1:
                    raise Fail("max_batch_size %d but metadata %s shape %s has no -1 batch dim: perf_analyzer "
                               "drops the first dim" % (mbs, t["name"], shape))
                shape = shape[1:]
            tensors[t["name"]] = (t["datatype"], shape, kind)
    for kind, key in (("input", "inputs"), ("output", "outputs")):
        for t in cfg.get(kind, []):
            if t["name"] not in tensors:
                raise Fail("no metadata found for %s tensor %s" % (kind, t["name"]))
    sched = "dynamic" if "dynamic_batching" in cfg else "none"
    return tensors, mbs, sched


def step_parse(proto):
    tensors, mbs, sched = parse_model(proto)
    ext = extensions(proto)
    if "statistics" not in ext:
        raise Fail("extensions %s lack statistics: perf_analyzer runs without server-side stats" % sorted(ext))
    return "max_batch_size %d, scheduler %s, %d tensors" % (mbs, sched, len(tensors))


# ---- statistics as ParseStatistics reads them


FIELDS = ("success", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss")


def read_stats(proto, model=MODEL):
    doc = statistics(proto, model)
    out = {}
    for s in doc["model_stats"]:
        if not isinstance(s.get("version"), str):
            raise Fail("model_stats version %r is not a string" % s.get("version"))
        row = {}
        for k in ("inference_count", "execution_count"):
            v = s.get(k)
            if proto == "http" and not isinstance(v, int):
                raise Fail("%s is %r, not a JSON integer (rapidjson GetUint64)" % (k, v))
            row[k] = int(v)
        for f in FIELDS:
            d = s.get("inference_stats", {}).get(f)
            if not isinstance(d, dict):
                raise Fail("inference_stats.%s missing" % f)
            for k in ("count", "ns"):
                if proto == "http" and not isinstance(d.get(k), int):
                    raise Fail("inference_stats.%s.%s is %r, not a JSON integer" % (f, k, d.get(k)))
                row[f + "." + k] = int(d.get(k, 0))
        out[(s["name"], s["version"])] = row
    return out


def stats_delta(before, after, model=MODEL, version=""):
    # DetermineStatsModelVersion: with no -x, the version whose queue count grew in the window.
    grew = [k for k in after if k[0] == model and after[k]["queue.count"] > before.get(k, {}).get("queue.count", 0)]
    if version:
        grew = [k for k in after if k == (model, version)]
    if not grew:
        raise Fail("no version of %s whose queue.count grew: 'failed to find the requested model version'" % model)
    key = max(grew, key=lambda k: int(k[1]))
    a, b = after[key], before.get(key, {})
    d = {k: a[k] - b.get(k, 0) for k in a}
    if not d["compute_input.count"] == d["compute_infer.count"] == d["compute_output.count"]:
        raise Fail("compute input/infer/output counts differ: %d/%d/%d ('Server side statistics compute counts "
                   "must be the same')" % (d["compute_input.count"], d["compute_infer.count"], d["compute_output.count"]))
    return d


# ---- inference as perf_analyzer sends it

A = np.arange(16, dtype=np.int32)
B = np.ones(16, dtype=np.int32)


def http_infer_body(req_id=None, shm=None):
    """The C++ client's request: binary inputs (binary_data_size), outputs asked for by name."""
    if shm:
        inputs = [{"name": n, "datatype": "INT32", "shape": [1, 16],
                   "parameters": {"shared_memory_region": n + "_0_0", "shared_memory_byte_size": 64}}
                  for n in ("INPUT0", "INPUT1")]
        outputs = [{"name": n, "parameters": {"shared_memory_region": n, "shared_memory_byte_size": 64}}
                   for n in ("OUTPUT0", "OUTPUT1")]
        raw = b""
    else:
        inputs = [{"name": n, "datatype": "INT32", "shape": [1, 16], "parameters": {"binary_data_size": 64}}
                  for n in ("INPUT0", "INPUT1")]
        outputs = [{"name": n, "parameters": {"binary_data": True}} for n in ("OUTPUT0", "OUTPUT1")]
        raw = A.tobytes() + B.tobytes()
    req = {"inputs": inputs, "outputs": outputs}
    if req_id:
        req["id"] = req_id
    head = json.dumps(req, separators=(",", ":")).encode()
    hdrs = {"Inference-Header-Content-Length": str(len(head)), "Expect": "",
            "Content-Type": "application/json" if shm else "application/octet-stream"}
    return head + raw, hdrs


def check_http_outputs(data, hdrs, shm=False):
    n = int(hdrs.get("Inference-Header-Content-Length") or len(data))
    head = json.loads(data[:n])
    for o in head.get("outputs", []):
        # InferResultHttp: an output with "parameters" must carry binary_data_size, else the result
        # is an error (perf_analyzer stops); a shared-memory output gets neither data nor that member.
        if "parameters" in o and "binary_data_size" not in (o["parameters"] or {}):
            raise Fail("output %s has parameters %s without binary_data_size: the C++ client fails the "
                       "request" % (o.get("name"), o["parameters"]))
    if shm:
        return
    raw, off, got = data[n:], 0, {}
    for o in head["outputs"]:
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is None:
            raise Fail("output %s not binary though binary_data was asked" % o["name"])
        got[o["name"]] = np.frombuffer(raw[off:off + size], dtype=np.int32)
        off += size
    if not (np.array_equal(got.get("OUTPUT0"), A + B) and np.array_equal(got.get("OUTPUT1"), A - B)):
        raise Fail("wrong outputs %s" % got)


def grpc_request(req_id, shm=False):
    r = pb.ModelInferRequest(model_name=MODEL, id=req_id)
    for n in ("INPUT0", "INPUT1"):
        t = r.inputs.add(name=n, datatype="INT32", shape=[1, 16])
        if shm:
            t.parameters["shared_memory_region"].string_param = n + "_0_0"
            t.parameters["shared_memory_byte_size"].int64_param = 64
    for n in ("OUTPUT0", "OUTPUT1"):
        o = r.outputs.add(name=n)
        if shm:
            o.parameters["shared_memory_region"].string_param = n
            o.parameters["shared_memory_byte_size"].int64_param = 64
    if not shm:
        r.raw_input_contents.extend([A.tobytes(), B.tobytes()])
    return r


def check_grpc_outputs(resp, want_id, shm=False):
    if resp.id != want_id:
        raise Fail("response id %r, request id %r: perf_analyzer matches async/stream responses by id" % (resp.id, want_id))
    if shm:
        return
    got = {o.name: np.frombuffer(raw, dtype=np.int32) for o, raw in zip(resp.outputs, resp.raw_output_contents)}
    if not (np.array_equal(got.get("OUTPUT0"), A + B) and np.array_equal(got.get("OUTPUT1"), A - B)):
        raise Fail("wrong outputs %s" % got)


def worker(proto, mode, tid, stop, counts, errors, shm):
    """One perf_analyzer context: sends, waits for the answer, sends again until the window ends."""
    try:
        k = 0
        if proto == "http":
            conn = http.client.HTTPConnection(HTTP_HP, timeout=20)
            while not stop.is_set():
                body, hdrs = http_infer_body(shm=shm)
                conn.request("POST", "/v2/models/%s/infer" % MODEL, body=body, headers=hdrs)
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise Fail("infer -> %d %s" % (r.status, data[:200]))
                check_http_outputs(data, dict(r.getheaders()), shm)
                counts[tid] += 1
            return
        if mode == "stream":
            reqs = queue.Queue()

            def gen():
                while True:
                    r = reqs.get()
                    if r is None:
                        return
                    yield r

            responses = stub().ModelStreamInfer(gen(), timeout=120)
            while not stop.is_set():
                rid = str((tid << 48) | k)
                k += 1
                reqs.put(grpc_request(rid, shm))
                resp = next(responses)
                if resp.error_message:
                    raise Fail("stream error in band: %s" % resp.error_message)
                check_grpc_outputs(resp.infer_response, rid, shm)
                counts[tid] += 1
            reqs.put(None)
            return
        while not stop.is_set():
            rid = str((tid << 48) | k)
            k += 1
            check_grpc_outputs(stub().ModelInfer(grpc_request(rid, shm), timeout=20), rid, shm)
            counts[tid] += 1
    except Exception as e:  # noqa: BLE001
        errors.append(e)


def sweep(proto, mode="sync", shm=False):
    """--concurrency-range 1:4: per level, stats, one window of load, stats; compare."""
    notes = []
    for c in (1, 2, 3, 4):
        before = None if NOSTATS else read_stats(proto)
        sent = run_window(c, lambda t, stop, counts, errors: worker(proto, mode, t, stop, counts, errors, shm))
        if sent == 0:
            raise Fail("concurrency %d: No valid requests recorded" % c)
        if NOSTATS:
            notes.append("c%d %d" % (c, sent))
            continue
        d = stats_delta(before, read_stats(proto))
        if d["success.count"] != sent:
            # Here (unlike perf_analyzer's windows) every request ends inside the stats' bracket.
            raise Fail("concurrency %d: statistics count %d successes, %d requests were answered" % (c, d["success.count"], sent))
        if d["inference_count"] != sent:
            raise Fail("concurrency %d: inference_count +%d for %d requests of batch 1" % (c, d["inference_count"], sent))
        notes.append("c%d %d" % (c, sent))
    return ", ".join(notes)


# ---- system shared memory as InferDataManagerShm sets it up


def unregister_all(proto):
    """UnregisterAllSharedMemory: system then CUDA, both with an empty name."""
    if proto == "http":
        http_call("POST", "/v2/systemsharedmemory/unregister")
        http_call("POST", "/v2/cudasharedmemory/unregister")
    else:
        stub().SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name=""), timeout=20)
        stub().CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest(name=""), timeout=20)


def shm_sweep(proto):
    regions = {"OUTPUT0": None, "OUTPUT1": None, "INPUT0_0_0": A, "INPUT1_0_0": B}
    maps = {}
    try:
        try:
            unregister_all(proto)  # at Init perf_analyzer ignores this call's error
        except Exception:  # noqa: BLE001
            pass
        for name, data in regions.items():
            fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_RDWR, 0o600)
            os.ftruncate(fd, 64)
            maps[name] = mmap.mmap(fd, 64)
            os.close(fd)
            if data is not None:
                maps[name][:] = data.tobytes()
            if proto == "http":
                http_call("POST", "/v2/systemsharedmemory/region/%s/register" % name,
                          json.dumps({"key": "/" + name, "offset": 0, "byte_size": 64}).encode(),
                          {"Content-Type": "application/json"})
            else:
                stub().SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                    name=name, key="/" + name, offset=0, byte_size=64), timeout=20)
        note = sweep(proto, shm=True)  # every context shares the same output regions, as perf_analyzer's do
        o0 = np.frombuffer(maps["OUTPUT0"][:], dtype=np.int32)
        o1 = np.frombuffer(maps["OUTPUT1"][:], dtype=np.int32)
        if not (np.array_equal(o0, A + B) and np.array_equal(o1, A - B)):
            raise Fail("output regions hold %s %s" % (o0, o1))
        unregister_all(proto)  # at exit: an error here prints "Unable to unregister all shared memory regions"
        return note
    finally:
        for name, m in maps.items():
            m.close()
            try:
                os.unlink("/dev/shm/" + name)
            except OSError:
                pass


# ---- an ensemble: ModelParser::DetermineComposingModelMap, then every window's statistics of all
# models (GetServerSideStatus with no name), each composing model summarized apart

ENSEMBLE = "diamond"  # make_repo.py's: IN [-1,3] FP32 -> OUT = 3x + x^3, four runs of two_io


def composing_map(proto, model, version=""):
    """AddEnsembleComposingModels: {ensemble: {(step model, version or "" for -1)}}, recursively."""
    cfg = config(proto, model, version)
    out = {}
    if cfg.get("platform") != "ensemble":
        return out
    steps = (cfg.get("ensemble_scheduling") or {}).get("step")
    if not steps:
        raise Fail("%s: platform ensemble without ensemble_scheduling.step" % model)
    for st in steps:
        v = st.get("model_version")
        if not isinstance(v, (int, str)):
            raise Fail("%s step model_version is %r: GetInt wants an integer or a string" % (model, v))
        key = (st["model_name"], "" if int(v) == -1 else str(int(v)))
        out.setdefault(model, set()).add(key)
        for k, vs in composing_map(proto, *key).items():
            out.setdefault(k, set()).update(vs)
    return out


def ensemble_worker(proto, tid, stop, counts, errors):
    try:
        x = np.arange(3, dtype=np.float32).reshape(1, 3) + tid
        want = 3 * x + x ** 3
        conn = http.client.HTTPConnection(HTTP_HP, timeout=20) if proto == "http" else None
        k = 0
        while not stop.is_set():
            if proto == "http":
                head = json.dumps({"inputs": [{"name": "IN", "datatype": "FP32", "shape": [1, 3],
                                               "parameters": {"binary_data_size": 12}}],
                                   "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}]}).encode()
                conn.request("POST", "/v2/models/%s/infer" % ENSEMBLE, body=head + x.tobytes(),
                             headers={"Inference-Header-Content-Length": str(len(head)), "Expect": "",
                                      "Content-Type": "application/octet-stream"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    raise Fail("infer %s -> %d %s" % (ENSEMBLE, r.status, data[:200]))
                n = int(r.getheader("Inference-Header-Content-Length") or len(data))
                got = np.frombuffer(data[n:], dtype=np.float32)
            else:
                rid = str((tid << 48) | k)
                req = pb.ModelInferRequest(model_name=ENSEMBLE, id=rid)
                req.inputs.add(name="IN", datatype="FP32", shape=[1, 3])
                req.outputs.add(name="OUT")
                req.raw_input_contents.append(x.tobytes())
                resp = stub().ModelInfer(req, timeout=20)
                got = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32) if resp.raw_output_contents else None
            if got is None or not np.allclose(got, want.reshape(-1), rtol=1e-5):
                raise Fail("%s answered %s, want %s" % (ENSEMBLE, got, want))
            k += 1
            counts[tid] += 1
    except Exception as e:  # noqa: BLE001
        errors.append(e)


def ensemble_sweep(proto):
    cmap = composing_map(proto, ENSEMBLE)
    if cmap.get(ENSEMBLE) != {("two_io", "")}:
        raise Fail("composing models of %s: %s, want two_io (version -1)" % (ENSEMBLE, cmap))
    if "statistics" not in extensions(proto):
        raise Fail("no statistics extension")
    notes = []
    for c in (1, 2, 3, 4):
        before = read_stats(proto, "")
        sent = run_window(c, lambda t, stop, counts, errors: ensemble_worker(proto, t, stop, counts, errors))
        after = read_stats(proto, "")
        d = stats_delta(before, after, ENSEMBLE)
        step = stats_delta(before, after, "two_io")
        if d["success.count"] != sent or step["success.count"] != 4 * sent:
            raise Fail("concurrency %d: %d requests answered; statistics count %s %d, two_io %d (want %d)"
                       % (c, sent, ENSEMBLE, d["success.count"], step["success.count"], 4 * sent))
        notes.append("c%d %d" % (c, sent))
    return ", ".join(notes)


def main():
    for proto in ("http", "grpc"):
        report("pa_seq.%s.metadata_config_extensions" % proto, lambda: step_parse(proto))
        report("pa_seq.%s.sweep" % proto, lambda: sweep(proto))
    report("pa_seq.grpc.streaming", lambda: sweep("grpc", mode="stream"))
    report("pa_seq.http.shm_system", lambda: shm_sweep("http"))
    report("pa_seq.grpc.shm_system", lambda: shm_sweep("grpc"))
    for proto in ("http", "grpc"):
        report("pa_seq.%s.ensemble_diamond" % proto, lambda: ensemble_sweep(proto))
    sys.exit(0 if all(OK) else 1)


if __name__ == "__main__":
    main()
