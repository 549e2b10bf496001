#!/usr/bin/python3
"""Generate image_mean.onnx, the tiny image classifier of the quick-start test.

Usage:
    /usr/bin/python3 bridge/redisdoor/testdata/gen_image_model.py bridge/redisdoor/testdata

Input "image" float32 [-1,3,224,224] (CHW, as the default image pre-processing
gives), output "prob" float32 [-1,5]: softmax of a fixed 3x5 matrix applied to
the per-channel means. Opset 13, IR version 8, deterministic weights, so the
file is byte-identical on every run.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out):
    w = (np.arange(15, dtype=np.float32).reshape(3, 5) - 7) / 255.0
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["image"], ["mean"], axes=[2, 3], keepdims=0),
            helper.make_node("MatMul", ["mean", "w"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
        ],
        "image_mean",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, producer_name="cluster-serving-gen",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "image_mean.onnx"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
