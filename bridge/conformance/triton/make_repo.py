#!/usr/bin/env python3
"""Builds the model repository run.sh serves: Triton's public example models
(github:triton-inference-server/server, docs/examples/model_repository) with their config.pbtxt as
published. simple, densenet_onnx and inception_onnx come from this repo's copy
(infer/modelconfig/testdata/triton/model_repository); simple_string from TRITON_CLIENTS/models,
where setup.sh puts it from the server source. densenet_onnx and inception_onnx get tiny generated
ONNX graphs with the same input/output names, types and shapes (the real weights are downloaded by
Triton's fetch_models.sh). Usage: make_repo.py REPO_DIR TRITON_CLIENTS"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "../../../infer/modelconfig/testdata/triton/model_repository")
REPO = sys.argv[1]
CLIENTS = sys.argv[2]


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def densenet(path):
    # data_0 [1,3,224,224] -> mean over H,W [1,3,1,1] -> 1x1 conv to 1000 channels -> fc6_1 [1,1000,1,1]
    w = numpy_helper.from_array(
        np.random.default_rng(1).standard_normal((1000, 3, 1, 1)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["data_0"], ["m"], axes=[2, 3], keepdims=1),
         helper.make_node("Conv", ["m", "w"], ["fc6_1"])],
        "densenet_tiny",
        [helper.make_tensor_value_info("data_0", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("fc6_1", TensorProto.FLOAT, [1, 1000, 1, 1])],
        [w])
    save(g, path)


def inception(path):
    # input:0 [1,299,299,3] -> mean over H,W [1,3] -> matmul [3,1001] -> softmax [1,1001]
    w = numpy_helper.from_array(
        np.random.default_rng(2).standard_normal((3, 1001)).astype(np.float32), "w")
    out = "InceptionV3/Predictions/Softmax:0"
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input:0"], ["m"], axes=[1, 2], keepdims=0),
         helper.make_node("MatMul", ["m", "w"], ["logits"]),
         helper.make_node("Softmax", ["logits"], [out], axis=1)],
        "inception_tiny",
        [helper.make_tensor_value_info("input:0", TensorProto.FLOAT, [1, 299, 299, 3])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1001])],
        [w])
    save(g, path)


def copy_example(name):
    src = TESTDATA if os.path.isdir(os.path.join(TESTDATA, name)) else os.path.join(CLIENTS, "models")
    if not os.path.isdir(os.path.join(src, name)):
        sys.exit("make_repo.py: no %s in %s or %s (run setup.sh)" % (name, TESTDATA, src))
    d = os.path.join(REPO, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(os.path.join(src, name)):
        s = os.path.join(src, name, f)
        if os.path.isfile(s):
            shutil.copy(s, d)
    if os.path.isdir(os.path.join(src, name, "1")):
        shutil.copytree(os.path.join(src, name, "1"), os.path.join(d, "1"), dirs_exist_ok=True)


def variant(name, edit):
    """A copy of simple (its real model) under another name, its config.pbtxt changed by edit."""
    d = os.path.join(REPO, name)
    shutil.copytree(os.path.join(TESTDATA, "simple", "1"), os.path.join(d, "1"), dirs_exist_ok=True)
    with open(os.path.join(TESTDATA, "simple", "config.pbtxt")) as f:
        cfg = f.read()
    cfg = cfg.replace('name: "simple"', 'name: "%s"' % name)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(edit(cfg))


def main():
    if os.path.exists(REPO):
        shutil.rmtree(REPO)
    for name in ("simple", "simple_string", "densenet_onnx", "inception_onnx"):
        copy_example(name)
    densenet(os.path.join(REPO, "densenet_onnx/1/model.onnx"))
    inception(os.path.join(REPO, "inception_onnx/1/model.onnx"))
    # max_batch_size 0: no batch dimension, so the dims are the model's full shape [-1, 16].
    variant("simple_nobatch", lambda c: c.replace("max_batch_size: 8", "max_batch_size: 0")
            .replace("dims: [ 16 ]", "dims: [ -1, 16 ]"))
    variant("simple_dyna", lambda c: c + "\ndynamic_batching {\n  max_queue_delay_microseconds: 2000\n}\n")
    for root, _, files in sorted(os.walk(REPO)):
        for f in sorted(files):
            print(os.path.relpath(os.path.join(root, f), REPO))


if __name__ == "__main__":
    main()
