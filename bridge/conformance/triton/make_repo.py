#!/usr/bin/env python3
"""Builds the model repository run.sh serves: Triton's public example models
(github:triton-inference-server/server, docs/examples/model_repository) with their config.pbtxt as
published. simple, densenet_onnx and inception_onnx come from this repo's copy
(infer/modelconfig/testdata/triton/model_repository); simple_string from TRITON_CLIENTS/models,
where setup.sh puts it from the server source. densenet_onnx and inception_onnx get tiny generated
ONNX graphs with the same input/output names, types and shapes (the real weights are downloaded by
Triton's fetch_models.sh).

Ensembles (config.pbtxt `platform: "ensemble"`, an empty version directory 1/), over two_io
(infer/testdata/two_io.onnx: sum = a+b, prod = a*b on [batch,3] FP32) and scale (Y = k*X, one
generated graph per version: k = 2, 10, 100 in versions 1, 2, 3; version_policy specific [1, 2],
so version 3 is on disk but not served):
  diamond          OUT = 3x + x^3 (four steps on two_io: two of them in parallel)
  pinned           scale version 1 (Y = 2x), then two_io: OUT = 2x + x = 3x
  pinned_latest    scale version -1, the latest served (2, not 3): OUT = 10x + x = 11x
  nested           diamond (an ensemble) then two_io: OUT = 4x + x^3, OUT2 = 3x^2 + x^4
  broken_unknown   a step names a model the repository lacks          -> UNAVAILABLE
  broken_dtype     INT32 input fed to two_io's FP32 a                 -> UNAVAILABLE
  broken_version   pinned to scale version 3, which does not serve     -> UNAVAILABLE
ensembles.py holds what each answers and runs, which the checks share.

Scheduling (scheduling.py checks them), over slow: Y = X (W (W (... X))) / scale, a chain of
SLOW_STEPS 512x512 matmuls on [batch, 512] FP32, some 10 ms a batch, so that a queue
builds at the model and not at the door:
  sched_prio       priority_levels 2, default level 2
  sched_qsize      default_queue_policy max_queue_size 4
  sched_timeout    default_queue_policy allow_timeout_override (REJECT)
  sched_delay      the same with timeout_action DELAY
  sched_cache      response_cache enable
  sched_cancel     8 times the matmuls, no dynamic_batching: each request runs alone, so the
                   cancelled ones queue
  sched_warm       model_warmup of zero data; sched_warm_broken an input_data_file that is missing
Usage: make_repo.py REPO_DIR TRITON_CLIENTS"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ensembles import SCALE

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "../../../infer/modelconfig/testdata/triton/model_repository")
TWO_IO = os.path.join(HERE, "../../../infer/testdata/two_io.onnx")
REPO = CLIENTS = ""  # main sets them from the command line


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


def two_io():
    d = os.path.join(REPO, "two_io")
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    shutil.copy(TWO_IO, os.path.join(d, "1", "model.onnx"))
    write(d, """name: "two_io"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "a" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "sum" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "prod" data_type: TYPE_FP32 dims: [ 3 ] } ]
""")


def scale():
    # Y = k*X per version; version 3 is on disk only: the policy serves 1 and 2.
    for v, k in SCALE.items():
        g = helper.make_graph(
            [helper.make_node("Mul", ["X", "k"], ["Y"])], "scale_v%d" % v,
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 3])],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 3])],
            [numpy_helper.from_array(np.array([k], dtype=np.float32), "k")])
        save(g, os.path.join(REPO, "scale", str(v), "model.onnx"))
    write(os.path.join(REPO, "scale"), """name: "scale"
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { specific: { versions: [ 1, 2 ] } }
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
""")


SLOW_STEPS = 48


def slow(name, extra, steps=SLOW_STEPS):
    w = (np.eye(512, dtype=np.float32) + 0.001).astype(np.float32) / np.float32(1.512)
    nodes, x = [], "X"
    for i in range(steps):
        nodes.append(helper.make_node("MatMul", [x, "W"], ["h%d" % i]))
        x = "h%d" % i
    nodes.append(helper.make_node("Identity", [x], ["Y"]))
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 512])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 512])],
                          [numpy_helper.from_array(w, "W")])
    save(g, os.path.join(REPO, name, "1", "model.onnx"))
    write(os.path.join(REPO, name), """name: "%s"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 512 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 512 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
%s
""" % (name, extra))


def scheduling():
    slow("sched_prio", "dynamic_batching { priority_levels: 2 default_priority_level: 2 }")
    slow("sched_qsize", "dynamic_batching { default_queue_policy { max_queue_size: 4 } }")
    slow("sched_timeout", "dynamic_batching { default_queue_policy { allow_timeout_override: true } }")
    slow("sched_delay", "dynamic_batching { default_queue_policy { allow_timeout_override: true timeout_action: DELAY } }")
    warm = 'model_warmup [ { name: "w" batch_size: 2 inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 512 ] %s } } } ]'
    slow("sched_cache", "dynamic_batching { }\nresponse_cache { enable: true }")
    slow("sched_cancel", "", 8 * SLOW_STEPS)  # each request runs alone, some 10 ms: a long queue
    slow("sched_warm", "dynamic_batching { }\n" + warm % "zero_data: true")
    slow("sched_warm_broken", "dynamic_batching { }\n" + warm % 'input_data_file: "x.bin"')


def write(d, cfg):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(cfg)


def step(model, version, ins, outs):
    """One ensemble_scheduling step: ins and outs map the model's tensor to the ensemble's."""
    m = " ".join('input_map { key: "%s" value: "%s" }' % kv for kv in ins.items())
    m += " " + " ".join('output_map { key: "%s" value: "%s" }' % kv for kv in outs.items())
    return '    { model_name: "%s" model_version: %d %s }' % (model, version, m)


def ensemble(name, outputs, steps, in_type="TYPE_FP32"):
    """An ensemble named name with input IN [3] (in_type) and FP32 outputs; its version dir 1 is empty."""
    outs = ", ".join('{ name: "%s" data_type: TYPE_FP32 dims: [ 3 ] }' % o for o in outputs)
    write(os.path.join(REPO, name), """name: "%s"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: %s dims: [ 3 ] } ]
output [ %s ]
ensemble_scheduling {
  step [
%s
  ]
}
""" % (name, in_type, outs, ",\n".join(steps)))
    os.makedirs(os.path.join(REPO, name, "1"), exist_ok=True)


def diamond_steps(first="two_io"):
    """S = 2x, P = x^2 (step 0, on model first); S2 = S + x = 3x, P2 = P * x = x^3 (in parallel);
    OUT = S2 + P2."""
    return [step(first, -1, {"a": "IN", "b": "IN"}, {"sum": "S", "prod": "P"}),
            step("two_io", -1, {"a": "S", "b": "IN"}, {"sum": "S2"}),
            step("two_io", -1, {"a": "P", "b": "IN"}, {"prod": "P2"}),
            step("two_io", -1, {"a": "S2", "b": "P2"}, {"sum": "OUT"})]


def ensembles():
    two_io()
    scale()
    ensemble("diamond", ["OUT"], diamond_steps())
    for name, version in (("pinned", 1), ("pinned_latest", -1), ("broken_version", 3)):
        ensemble(name, ["OUT"], [step("scale", version, {"X": "IN"}, {"Y": "T"}),
                                 step("two_io", -1, {"a": "T", "b": "IN"}, {"sum": "OUT"})])
    ensemble("nested", ["OUT", "OUT2"], [
        step("diamond", -1, {"IN": "IN"}, {"OUT": "D"}),
        step("two_io", -1, {"a": "D", "b": "IN"}, {"sum": "OUT", "prod": "OUT2"})])
    ensemble("broken_unknown", ["OUT"], diamond_steps(first="no_such_step_model"))
    ensemble("broken_dtype", ["OUT"], diamond_steps(), in_type="TYPE_INT32")


def main():
    global REPO, CLIENTS
    REPO, CLIENTS = sys.argv[1], sys.argv[2]
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
    ensembles()
    scheduling()
    for root, _, files in sorted(os.walk(REPO)):
        for f in sorted(files):
            print(os.path.relpath(os.path.join(root, f), REPO))


if __name__ == "__main__":
    main()
