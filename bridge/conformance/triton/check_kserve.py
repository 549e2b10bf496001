#!/usr/bin/env python3
"""The KServe SDK's clients (kserve.inference_client from github:kserve/kserve) against a running server.

One line per check: "PASS <name>" or "FAIL <name>: <reason>"; exit status 1 if any failed.
Usage: check_kserve.py HTTP_HOST:PORT GRPC_HOST:PORT
"""
import asyncio
import sys

import numpy as np
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig

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
    await c.close()


async def main():
    await rest_checks()
    await grpc_checks()


if __name__ == "__main__":
    import logging
    logging.disable(logging.CRITICAL)  # the SDK logs every RPC error with a traceback
    asyncio.run(main())
    sys.exit(0 if all(RESULTS) else 1)
