#!/usr/bin/env python3
"""The KServe SDK's clients (kserve.inference_client from github:kserve/kserve) against a running server.

One line per check: "PASS <name>" or "FAIL <name>: <reason>"; exit status 1 if any failed.
Usage: check_kserve.py HTTP_HOST:PORT GRPC_HOST:PORT
"""
import asyncio
import sys

import numpy as np
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig

from ensembles import BROKEN, ENSEMBLES

HTTP_URL, GRPC_URL = sys.argv[1], sys.argv[2]
BASE = "http://" + HTTP_URL
RESULTS = []


def simple_request():
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    ins = []
    for n, v in (("INPUT0", a), ("INPUT1", b)):
        i = InferInput(n, list(v.shape), "INT32")
        i.set_data_from_numpy(v)
        ins.append(i)
    return InferRequest(model_name="simple", infer_inputs=ins, request_id="k1"), a, b


def assert_simple(resp, a, b):
    outs = {o.name: o.as_numpy() for o in resp.outputs}
    assert set(outs) == {"OUTPUT0", "OUTPUT1"}, "outputs %s" % sorted(outs)
    assert np.array_equal(outs["OUTPUT0"].reshape(1, 16), a + b), outs["OUTPUT0"]
    assert np.array_equal(outs["OUTPUT1"].reshape(1, 16), a - b), outs["OUTPUT1"]


def ensemble_request(model, batch, binary=True):
    x = np.random.default_rng(batch).uniform(-2, 2, (batch, 3)).astype(np.float32)
    i = InferInput("IN", [batch, 3], "FP32")
    i.set_data_from_numpy(x, binary_data=binary)
    return InferRequest(model_name=model, infer_inputs=[i], request_id="e%d" % batch), x


def assert_ensemble(model, resp, x):
    """Every output of ensemble model as numpy computes it (float64) from x."""
    want = ENSEMBLES[model]["outputs"]
    outs = {o.name: o.as_numpy() for o in resp.outputs}
    assert set(outs) == set(want), "%s outputs %s, want %s" % (model, sorted(outs), sorted(want))
    for n, f in want.items():
        w = f(x.astype(np.float64))
        got = np.asarray(outs[n], dtype=np.float64).reshape(w.shape)
        assert np.allclose(got, w, rtol=1e-5, atol=1e-5), "%s.%s = %s, want %s" % (model, n, got.tolist(), w.tolist())


async def ensemble_ready(is_model_ready):
    """Every working ensemble ready, every broken one not."""
    got = {m: await is_model_ready(m) for m in list(ENSEMBLES) + list(BROKEN)}
    want = {m: m in ENSEMBLES for m in got}
    assert got == want, "is_model_ready %s, want %s" % (got, want)


async def run(name, coro):
    try:
        await asyncio.wait_for(coro, 30)
        RESULTS.append(True)
        print("PASS %s" % name, flush=True)
    except Exception as e:  # noqa: BLE001
        RESULTS.append(False)
        print("FAIL %s: %s: %s" % (name, type(e).__name__, str(e).replace("\n", " ")[:300]), flush=True)


async def rest_checks():
    c = InferenceRESTClient(RESTConfig(protocol="v2", retries=1, timeout=20))

    async def live():
        assert await c.is_server_live(BASE) is True, "is_server_live not True"

    async def ready():
        assert await c.is_server_ready(BASE) is True, "is_server_ready not True"

    async def model_ready():
        assert await c.is_model_ready(BASE, "simple") is True, "simple not ready"
        assert await c.is_model_ready(BASE, "no_such_model") is False, "unknown model ready"

    async def infer():
        req, a, b = simple_request()
        assert_simple(await c.infer(BASE, req, model_name="simple"), a, b)

    for n, f in (("live", live), ("ready", ready), ("model_ready", model_ready), ("infer", infer)):
        await run("kserve.rest." + n, f())
    await run("kserve.rest.ensemble_ready", ensemble_ready(lambda m: c.is_model_ready(BASE, m)))

    async def ensemble_infer(model, binary):
        for batch in (1, 2):
            req, x = ensemble_request(model, batch, binary)
            assert_ensemble(model, await c.infer(BASE, req, model_name=model), x)

    for model in ENSEMBLES:
        await run("kserve.rest.ensemble_infer_" + model, ensemble_infer(model, True))
    await run("kserve.rest.ensemble_infer_diamond_json", ensemble_infer("diamond", False))
    await c.close()


async def grpc_checks():
    c = InferenceGRPCClient(GRPC_URL, timeout=20)

    async def live():
        assert await c.is_server_live() is True, "is_server_live not True"

    async def ready():
        assert await c.is_server_ready() is True, "is_server_ready not True"

    async def model_ready():
        assert await c.is_model_ready("simple") is True, "simple not ready"
        assert await c.is_model_ready("no_such_model") is False, "unknown model ready"

    async def infer():
        req, a, b = simple_request()
        resp = await c.infer(req)
        assert resp.id == "k1", "id %r" % resp.id
        assert_simple(resp, a, b)

    for n, f in (("live", live), ("ready", ready), ("model_ready", model_ready), ("infer", infer)):
        await run("kserve.grpc." + n, f())
    await run("kserve.grpc.ensemble_ready", ensemble_ready(c.is_model_ready))

    async def ensemble_infer(model):
        for batch in (1, 2):
            req, x = ensemble_request(model, batch)
            resp = await c.infer(req)
            assert resp.id == "e%d" % batch, "id %r" % resp.id
            assert_ensemble(model, resp, x)

    for model in ENSEMBLES:
        await run("kserve.grpc.ensemble_infer_" + model, ensemble_infer(model))
    await c.close()


async def main():
    await rest_checks()
    await grpc_checks()


if __name__ == "__main__":
    import logging
    logging.disable(logging.CRITICAL)  # the SDK logs every RPC error with a traceback
    asyncio.run(main())
    sys.exit(0 if all(RESULTS) else 1)
