#!/usr/bin/python3
"""Generate the tiny ONNX test models of package infer.

Usage:
    /usr/bin/python3 infer/testdata/gen_models.py infer/testdata
    /usr/bin/python3 infer/testdata/gen_models.py --resnet50 OUT.onnx

Every model uses opset 13 and IR version 8, and every weight is deterministic,
so re-running the script rewrites byte-identical files. The ResNet-50-shaped
model (about 100 MB) is not committed: the benchmarks generate it into a cache
directory.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8


def save(model, path):
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, path)


def save_in(out, model):
    """Saves model as out/NAME.onnx, NAME its graph's name."""
    save(model, os.path.join(out, model.graph.name + ".onnx"))


def emit(out, name, nodes, inputs, outputs, inits=()):
    """Saves the model make builds as out/NAME.onnx."""
    save_in(out, make(name, nodes, inputs, outputs, inits))


def make(name, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(
        graph,
        producer_name="cluster-serving-gen",
        opset_imports=[helper.make_opsetid("", OPSET)],
    )


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, arr):
    return numpy_helper.from_array(arr, name)


def affine(name, elem, npdt, shape, scale=2, bias=1):
    """y = x*scale + bias."""
    return make(
        name,
        [
            helper.make_node("Mul", ["x", "scale"], ["t"]),
            helper.make_node("Add", ["t", "bias"], ["y"]),
        ],
        [vi("x", elem, shape)],
        [vi("y", elem, shape)],
        [const("scale", np.array(scale, dtype=npdt)), const("bias", np.array(bias, dtype=npdt))],
    )


def identity(name, elem, shape):
    return make(
        name,
        [helper.make_node("Identity", ["x"], ["y"])],
        [vi("x", elem, shape)],
        [vi("y", elem, shape)],
    )


def cast(name, src, dst, shape):
    return make(
        name,
        [helper.make_node("Cast", ["x"], ["y"], to=dst)],
        [vi("x", src, shape)],
        [vi("y", dst, shape)],
    )


def dtype_models(out):
    """One identity model per element type beyond the first six, and a
    float32 <-> float16 Cast pair: the codecs' answers are checked against
    ONNX Runtime run directly on these."""
    for name, elem in [
        ("identity_i8", TensorProto.INT8),
        ("identity_i16", TensorProto.INT16),
        ("identity_u16", TensorProto.UINT16),
        ("identity_u32", TensorProto.UINT32),
        ("identity_u64", TensorProto.UINT64),
        ("identity_f16", TensorProto.FLOAT16),
        ("identity_bf16", TensorProto.BFLOAT16),
    ]:
        save_in(out, identity(name, elem, ["batch", 4]))
    save_in(out, cast("cast_f32_f16", TensorProto.FLOAT, TensorProto.FLOAT16, ["batch", 4]))
    save_in(out, cast("cast_f16_f32", TensorProto.FLOAT16, TensorProto.FLOAT, ["batch", 4]))
    # A float16 output whose second dim is named as an input's ("seq") has
    # a size known before the run; one named after nothing ("other") has not.
    save_in(out, cast("cast_f32_f16_seq", TensorProto.FLOAT, TensorProto.FLOAT16, ["batch", "seq"]))
    emit(
        out,
        "cast_f32_f16_free",
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)],
        [vi("x", TensorProto.FLOAT, ["batch", "seq"])],
        [vi("y", TensorProto.FLOAT16, ["batch", "other"])],
    )


def string_models(out):
    """STRING (OIP BYTES) tensors: an identity, Casts both ways between
    STRING and FLOAT, a Gather that picks one string into a rank-0 output,
    and an identity of a rank-0 string."""
    save_in(out, identity("identity_str", TensorProto.STRING, ["batch", 2]))
    save_in(out, cast("cast_str_f32", TensorProto.STRING, TensorProto.FLOAT, ["batch", 3]))
    save_in(out, cast("cast_f32_str", TensorProto.FLOAT, TensorProto.STRING, ["batch", 3]))
    emit(
        out,
        "pick_str",
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
        [vi("x", TensorProto.STRING, ["n"]), vi("i", TensorProto.INT64, [])],
        [vi("y", TensorProto.STRING, [])],
    )
    # A rank-0 string input, which onnxruntime_go v1.27 cannot make: refused at load.
    save_in(out, identity("identity_str_scalar", TensorProto.STRING, []))


def small_models(out):
    save_in(out, affine("add_f32", TensorProto.FLOAT, np.float32, ["batch", 4]))
    save_in(out, affine("add_f64", TensorProto.DOUBLE, np.float64, ["batch", 4]))
    save_in(out, affine("add_i32", TensorProto.INT32, np.int32, ["batch", 4]))
    save_in(out, affine("add_i64", TensorProto.INT64, np.int64, ["batch", 4]))
    # Add has no uint8 kernel at opset 13: identity keeps the dtype.
    save_in(out, identity("identity_u8", TensorProto.UINT8, ["batch", 4]))
    dtype_models(out)
    string_models(out)
    emit(
        out,
        "not_bool",
        [helper.make_node("Not", ["x"], ["y"])],
        [vi("x", TensorProto.BOOL, ["batch", 4])],
        [vi("y", TensorProto.BOOL, ["batch", 4])],
    )
    # Two inputs, two outputs: sum = a+b, prod = a*b.
    emit(
        out,
        "two_io",
        [
            helper.make_node("Add", ["a", "b"], ["sum"]),
            helper.make_node("Mul", ["a", "b"], ["prod"]),
        ],
        [vi("a", TensorProto.FLOAT, ["batch", 3]), vi("b", TensorProto.FLOAT, ["batch", 3])],
        [vi("sum", TensorProto.FLOAT, ["batch", 3]), vi("prod", TensorProto.FLOAT, ["batch", 3])],
    )
    # Fixed batch dimension of 1.
    save_in(out, affine("fixed_f32", TensorProto.FLOAT, np.float32, [1, 4]))
    # Tiny classifier: softmax(x @ W + b), x[-1,8] -> probs[-1,5].
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    emit(
        out,
        "classifier",
        [
            helper.make_node("MatMul", ["x", "w"], ["mm"]),
            helper.make_node("Add", ["mm", "b"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
        ],
        [vi("x", TensorProto.FLOAT, ["batch", 8])],
        [vi("probs", TensorProto.FLOAT, ["batch", 5])],
        [const("w", w), const("b", b)],
    )
    # MatMul with a dynamic non-batch dim: x[-1,n,4] @ W[4,2] -> y[-1,n,2].
    w2 = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
    emit(
        out,
        "matmul_dyn",
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [vi("x", TensorProto.FLOAT, ["batch", "n", 4])],
        [vi("y", TensorProto.FLOAT, ["batch", "n", 2])],
        [const("w", w2)],
    )
    # Output dim 0 is not the batch: y = sum over the batch, [1,4].
    emit(
        out,
        "sum_batch",
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
        [vi("x", TensorProto.FLOAT, ["batch", 4])],
        [vi("y", TensorProto.FLOAT, [1, 4])],
        [const("axes", np.array([0], dtype=np.int64))],
    )
    # Image model: per-channel means of x[-1,3,224,224] -> y[-1,3], so tests
    # check the channel order and value range of decoded images exactly.
    emit(
        out,
        "image_mean",
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)],
        [vi("x", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [vi("y", TensorProto.FLOAT, ["batch", 3])],
    )
    # 128-value vectors, the shape of the ndarray-128 Redis fixture.
    save_in(out, affine("add_f32_128", TensorProto.FLOAT, np.float32, ["batch", 128]))
    # Row means of a [100,10000] tensor, the dense shape of the sparse
    # arrowBytes Redis fixture (its input is named like the fixture's column).
    emit(
        out,
        "sparse_rows",
        [helper.make_node("ReduceMean", ["my-img"], ["rows"], axes=[2], keepdims=0)],
        [vi("my-img", TensorProto.FLOAT, ["batch", 100, 10000])],
        [vi("rows", TensorProto.FLOAT, ["batch", 100])],
    )

    edge_models(out)


def edge_models(out):
    """Models that once crashed the server: scalars, no inputs, int division."""
    # The int32 models' input x and output y, [batch, 4].
    xi32, yi32 = [vi("x", TensorProto.INT32, ["batch", 4])], [vi("y", TensorProto.INT32, ["batch", 4])]
    # Scalar inputs: y = Clip(x, lo, hi), lo and hi rank 0 as Clip wants.
    emit(
        out,
        "clip_scalar",
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        [vi("x", TensorProto.FLOAT, ["batch", 4]), vi("lo", TensorProto.FLOAT, []), vi("hi", TensorProto.FLOAT, [])],
        [vi("y", TensorProto.FLOAT, ["batch", 4])],
    )
    # Scalar output: y = sum of every element of x, rank 0.
    emit(
        out,
        "sum_scalar",
        [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)],
        [vi("x", TensorProto.FLOAT, ["batch", 4])],
        [vi("y", TensorProto.FLOAT, [])],
    )
    # No inputs: a constant [1, 2].
    emit(
        out,
        "no_inputs",
        [helper.make_node("Constant", [], ["y"], value=const("v", np.array([1, 2], dtype=np.float32)))],
        [],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    # Integer division by a constant's side: div_i32 is y = 100 / x (a zero
    # x raises SIGFPE); div_zero_const_i32 is y = x / 0, refused at load.
    for name, operands, c, value in (("div_i32", ["c", "x"], "c", 100), ("div_zero_const_i32", ["x", "zero"], "zero", 0)):
        emit(out, name, [helper.make_node("Div", operands, ["y"])], xi32, yi32, [const(c, np.array(value, dtype=np.int32))])
    # Both operands from the request: q = a / b, r = a mod b. A zero b, fed
    # straight from the request, is what infer's division guard refuses.
    emit(
        out,
        "divmod_i32",
        [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Mod", ["a", "b"], ["r"])],
        [vi("a", TensorProto.INT32, ["batch", 4]), vi("b", TensorProto.INT32, ["batch", 4])],
        [vi("q", TensorProto.INT32, ["batch", 4]), vi("r", TensorProto.INT32, ["batch", 4])],
    )
    # A divisor computed inside the graph: y = x / (x - 1). The guard cannot
    # see it; infer warns at load and skips the warm-up (ones would divide
    # by zero).
    emit(
        out,
        "div_computed_i32",
        [helper.make_node("Sub", ["x", "one"], ["d"]), helper.make_node("Div", ["x", "d"], ["y"])],
        xi32,
        yi32,
        [const("one", np.array(1, dtype=np.int32))],
    )


def resnet50(path):
    """ResNet-50 v1 topology with batch norm folded into conv biases."""
    rng = np.random.default_rng(50)
    nodes, inits = [], []
    counter = [0]

    def fresh(prefix):
        counter[0] += 1
        return "%s_%d" % (prefix, counter[0])

    def conv(x, cin, cout, k, stride, relu=True, gain=1.0):
        w_name, b_name, y = fresh("w"), fresh("b"), fresh("conv")
        fan_in = cin * k * k
        w = (rng.standard_normal((cout, cin, k, k)) * gain * np.sqrt(2.0 / fan_in)).astype(np.float32)
        inits.append(const(w_name, w))
        inits.append(const(b_name, np.zeros((cout,), dtype=np.float32)))
        pad = k // 2
        nodes.append(
            helper.make_node(
                "Conv", [x, w_name, b_name], [y], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4
            )
        )
        if not relu:
            return y
        r = fresh("relu")
        nodes.append(helper.make_node("Relu", [y], [r]))
        return r

    x = conv("input", 3, 64, 7, 2)
    p = fresh("pool")
    nodes.append(helper.make_node("MaxPool", [x], [p], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = p, 64
    for stage, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for blk in range(blocks):
            stride = 2 if (blk == 0 and stage > 0) else 1
            cout = width * 4
            h = conv(x, cin, width, 1, 1)
            h = conv(h, width, width, 3, stride)
            # A small gain on the residual branch keeps activations bounded
            # over 16 blocks (the role zero-init BN gamma plays in training).
            h = conv(h, width, cout, 1, 1, relu=False, gain=0.2)
            if blk == 0:
                sc = conv(x, cin, cout, 1, stride, relu=False)
            else:
                sc = x
            s, r = fresh("add"), fresh("relu")
            nodes.append(helper.make_node("Add", [h, sc], [s]))
            nodes.append(helper.make_node("Relu", [s], [r]))
            x, cin = r, cout
    g, f = fresh("gap"), fresh("flat")
    nodes.append(helper.make_node("GlobalAveragePool", [x], [g]))
    nodes.append(helper.make_node("Flatten", [g], [f], axis=1))
    fw = (rng.standard_normal((2048, 1000)) * np.sqrt(1.0 / 2048)).astype(np.float32)
    inits.append(const("fc_w", fw))
    inits.append(const("fc_b", np.zeros((1000,), dtype=np.float32)))
    mm = fresh("mm")
    nodes.append(helper.make_node("MatMul", [f, "fc_w"], [mm]))
    nodes.append(helper.make_node("Add", [mm, "fc_b"], ["output"]))
    model = make(
        "resnet50",
        nodes,
        [vi("input", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [vi("output", TensorProto.FLOAT, ["batch", 1000])],
        inits,
    )
    save(model, path)


def config_models(out):
    """Models for Triton config.pbtxt tests (infer/modelconfig): the
    inputs and outputs of Triton's densenet_onnx example (whose config
    reshapes both) around a graph that averages the image, and the FP16
    identity of Triton's cpu_instance auto-complete test."""
    emit(
        out,
        "densenet_io",
        [
            helper.make_node("GlobalAveragePool", ["data_0"], ["pooled"]),
            helper.make_node("ReduceMean", ["pooled"], ["mean"], axes=[1], keepdims=1),
            helper.make_node("Expand", ["mean", "shape"], ["fc6_1"]),
        ],
        [vi("data_0", TensorProto.FLOAT, [1, 3, 224, 224])],
        [vi("fc6_1", TensorProto.FLOAT, [1, 1000, 1, 1])],
        [const("shape", np.array([1, 1000, 1, 1], dtype=np.int64))],
    )
    emit(
        out,
        "identity_f16_3d",
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        [vi("INPUT0", TensorProto.FLOAT16, ["batch", "a", "b"])],
        [vi("OUTPUT0", TensorProto.FLOAT16, ["batch", "a", "b"])],
    )


def main(argv):
    if len(argv) == 3 and argv[1] == "--resnet50":
        resnet50(argv[2])
        return 0
    if len(argv) == 2:
        os.makedirs(argv[1], exist_ok=True)
        small_models(argv[1])
        config_models(argv[1])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
