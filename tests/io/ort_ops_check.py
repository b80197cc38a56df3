#!/usr/bin/env python3
"""The operators tsopt imports from ONNX compute what ONNX Runtime computes.

For each case a one- or two-node ONNX model is built here (onnx.helper),
run in ONNX Runtime and in tsopt (tests/io/run_model: import + the reference
backend with tsopt::onnx::install_reference_ops), and the outputs compared
(relative error <= 1e-4: max|a-b| / max|b|). Covers what PyTorch's exporter
emits for torchvision backbones and transformer encoders (opsets 13-17):
Clip, HardSwish, HardSigmoid, Erf, ReduceMean/ReduceSum, Pow, Sqrt, Div,
Sub, LayerNormalization, Where, Expand, Cast, pooling with ceil_mode and
count_include_pad, Slice, Gather, Einsum, Pad, ReduceL2, constant subgraphs folded at
import (Swin's attention mask), ...

Exit 77 (meson: skipped) when onnx/onnxruntime/numpy cannot be installed.
usage: ort_ops_check.py RUN_MODEL_EXE WORKDIR
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_check import TOLERANCE, ensure_packages, relative_error  # noqa: E402


def cases(np, helper, T, nh):
    """(name, nodes, inputs {name: array}, initializers {name: array}, outputs [name], opset)"""
    rng = np.random.default_rng(5)
    x4 = rng.standard_normal((1, 4, 9, 9)).astype(np.float32) * 3
    x3 = rng.standard_normal((2, 5, 16)).astype(np.float32)
    pos = np.abs(x3) + 0.5
    n = helper.make_node
    f32 = lambda v: np.array(v, dtype=np.float32)
    i64 = lambda v: np.array(v, dtype=np.int64)
    yield "clip", [n("Clip", ["x", "lo", "hi"], ["y"])], {"x": x4}, {"lo": f32(0), "hi": f32(6)}, 17
    yield "clip_max_only", [n("Clip", ["x", "", "hi"], ["y"])], {"x": x4}, {"hi": f32(1.5)}, 13
    yield "relu6_min_only", [n("Clip", ["x", "lo"], ["y"])], {"x": x4}, {"lo": f32(-0.5)}, 13
    for op in ["Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "Softplus", "HardSwish"]:
        yield op.lower(), [n(op, ["x"], ["y"])], {"x": x3}, {}, 17
    for op in ["Sqrt", "Log", "Reciprocal"]:
        yield op.lower(), [n(op, ["x"], ["y"])], {"x": pos}, {}, 17
    yield "hardsigmoid", [n("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)], {"x": x3}, {}, 17
    yield "leakyrelu", [n("LeakyRelu", ["x"], ["y"], alpha=0.2)], {"x": x3}, {}, 17
    yield "elu", [n("Elu", ["x"], ["y"], alpha=0.7)], {"x": x3}, {}, 17
    yield "sub", [n("Sub", ["x", "z"], ["y"])], {"x": x3, "z": x3[:1, :, :1] * 2}, {}, 17
    yield "div", [n("Div", ["x", "z"], ["y"])], {"x": x3, "z": pos[0]}, {}, 17
    yield "div_const", [n("Div", ["x", "c"], ["y"])], {"x": x3}, {"c": f32(1.4142135)}, 17
    yield "pow_square", [n("Pow", ["x", "e"], ["y"])], {"x": x3}, {"e": f32(2)}, 17
    yield "pow_sqrt", [n("Pow", ["x", "e"], ["y"])], {"x": pos}, {"e": f32(0.5)}, 17
    yield "max3", [n("Max", ["x", "z", "w"], ["y"])], {"x": x3, "z": x3[:, :1], "w": -x3}, {}, 17
    yield "min2", [n("Min", ["x", "z"], ["y"])], {"x": x3, "z": x3[:1]}, {}, 17
    yield "sum3", [n("Sum", ["x", "z", "w"], ["y"])], {"x": x3, "z": x3[:, :1], "w": -x3}, {}, 17
    yield "mean2", [n("Mean", ["x", "z"], ["y"])], {"x": x3, "z": x3[:1]}, {}, 17
    scale, bias = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    yield "layernorm", [n("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)], {"x": x3}, {"s": scale, "b": bias}, 17
    yield "layernorm_nobias_axis1", [n("LayerNormalization", ["x", "s"], ["y"], axis=1)], {"x": x3}, \
        {"s": rng.standard_normal((5, 16)).astype(np.float32)}, 17
    yield "reducemean", [n("ReduceMean", ["x"], ["y"], axes=[-1])], {"x": x3}, {}, 17
    yield "reducemean_all_nokeep", [n("ReduceMean", ["x"], ["y"], keepdims=0)], {"x": x3}, {}, 17
    yield "reducesum", [n("ReduceSum", ["x", "a"], ["y"], keepdims=0)], {"x": x3}, {"a": i64([0, 2])}, 17
    yield "reducemax", [n("ReduceMax", ["x"], ["y"], axes=[1])], {"x": x3}, {}, 17
    cond = np.array([[True, False] * 8] * 5)
    yield "where", [n("Where", ["c", "x", "z"], ["y"])], {"x": x3, "z": x3[:1, :1] * 0.5}, {"c": cond}, 17
    yield "expand", [n("Expand", ["x", "s"], ["y"])], {"x": x3[:1, :1]}, {"s": i64([3, 2, 5, 16])}, 17
    yield "cast", [n("Cast", ["x"], ["y"], to=T.FLOAT)], {"x": x3}, {}, 17
    yield "maxpool_ceil", [n("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)], {"x": x4}, {}, 17
    yield "avgpool_exclude_pad", [n("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], {"x": x4}, {}, 17
    yield "avgpool_ceil_include_pad", [n("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                         ceil_mode=1, count_include_pad=1)], {"x": x4}, {}, 17
    # The exporter's decomposed LayerNormalization (opsets < 17).
    ln = [n("ReduceMean", ["x"], ["m"], axes=[-1]), n("Sub", ["x", "m"], ["d"]), n("Pow", ["d", "two"], ["p"]),
          n("ReduceMean", ["p"], ["v"], axes=[-1]), n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]),
          n("Div", ["d", "sd"], ["nrm"]), n("Mul", ["nrm", "s"], ["sc"]), n("Add", ["sc", "b"], ["y"])]
    yield "layernorm_decomposed", ln, {"x": x3}, {"two": f32(2), "eps": f32(1e-5), "s": scale, "b": bias}, 13
    # Reshape targets computed from the input's shape (folded at import).
    dyn = [n("Shape", ["x"], ["s"]), n("Gather", ["s", "i0"], ["b"], axis=0), n("Unsqueeze", ["b", "ax0"], ["bu"]),
           n("Slice", ["s", "one1", "big"], ["tail"]), n("Gather", ["tail", "first"], ["t0"]),
           n("Gather", ["tail", "second"], ["t1"]), n("Mul", ["t0", "t1"], ["prod"]),
           n("Concat", ["bu", "prod"], ["target"], axis=0),
           n("Reshape", ["x", "target"], ["flat"]), n("Shape", ["flat"], ["fs"], start=-1),
           n("Cast", ["fs"], ["fs64"], to=T.INT64), n("Div", ["fs64", "two64"], ["half"]),
           n("Concat", ["minus1", "half"], ["t2"], axis=0), n("Reshape", ["flat", "t2"], ["y"])]
    yield "shape_arithmetic", dyn, {"x": x3}, {"i0": i64(0), "ax0": i64([0]), "one1": i64([1]), "big": i64([1 << 40]),
                                               "two64": i64([2]), "minus1": i64([-1]),
                                               "first": i64([0]), "second": i64([1])}, 17
    # Slices: step 1 maps to the spec's slice; other steps, rank 5 and
    # negative steps run the reference implementation (Swin's patch merging).
    x5 = rng.standard_normal((3, 1, 4, 6, 5)).astype(np.float32)
    big = 1 << 62
    yield "slice_step1", [n("Slice", ["x", "s", "e", "a"], ["y"])], {"x": x3}, {"s": i64([1, -9]), "e": i64([-1, big]), "a": i64([1, 2])}, 17
    yield "slice_step2_rank5", [n("Slice", ["x", "s", "e", "a", "st"], ["y"])], {"x": x5}, \
        {"s": i64([0, 1]), "e": i64([big, big]), "a": i64([2, 3]), "st": i64([2, 2])}, 17
    yield "slice_negative_step", [n("Slice", ["x", "s", "e", "a", "st"], ["y"])], {"x": x3}, \
        {"s": i64([-1]), "e": i64([-big]), "a": i64([2]), "st": i64([-3])}, 17
    # Gathers: one index is a slice; several, or a rank above 4, the reference.
    yield "gather_scalar", [n("Gather", ["x", "i"], ["y"], axis=1)], {"x": x3}, {"i": i64(2)}, 17
    yield "gather_rank5_scalar", [n("Gather", ["x", "i"], ["y"], axis=0)], {"x": x5}, {"i": i64(1)}, 17
    yield "gather_indices", [n("Gather", ["x", "i"], ["y"], axis=2)], {"x": x3}, {"i": i64([[0, 3], [-1, 3]])}, 17
    # Einsum: MaxViT's attention (spaces, rank 5) and an implicit output.
    q5, k5 = rng.standard_normal((1, 2, 3, 5, 4)).astype(np.float32), rng.standard_normal((1, 2, 3, 6, 4)).astype(np.float32)
    yield "einsum_attention", [n("Einsum", ["q", "k"], ["y"], equation="B G H I D, B G H J D -> B G H I J")], {"q": q5, "k": k5}, {}, 17
    yield "einsum_implicit", [n("Einsum", ["a", "b"], ["y"], equation="ij,jk")], \
        {"a": x3[0], "b": rng.standard_normal((16, 7)).astype(np.float32)}, {}, 17
    yield "einsum_ellipsis_implicit", [n("Einsum", ["a", "b"], ["y"], equation="...ij,...jk")], \
        {"a": rng.standard_normal((2, 5, 4)).astype(np.float32), "b": rng.standard_normal((2, 4, 3)).astype(np.float32)}, {}, 17
    # Pads the spec's pad does not take (Swin V2: the last axes; other modes,
    # a value, cropping), L2 norms (F.normalize), Unsqueeze/Squeeze of a
    # computed tensor (reshapes).
    yield "pad_constant_last_axes", [n("Pad", ["x", "p", "v"], ["y"])], {"x": x3}, {"p": i64([0, 1, -2, 0, 2, 3]), "v": f32(1.5)}, 17
    yield "pad_reflect", [n("Pad", ["x", "p"], ["y"], mode="reflect")], {"x": x3}, {"p": i64([0, 2, 3, 0, 4, 5])}, 17
    yield "pad_edge", [n("Pad", ["x", "p"], ["y"], mode="edge")], {"x": x4}, {"p": i64([0, 2, 1, 0, 0, 0, 3, 1])}, 17
    yield "reducel2", [n("ReduceL2", ["x"], ["y"], axes=[-1])], {"x": x3}, {}, 17
    yield "reducesumsquare", [n("ReduceSumSquare", ["x"], ["y"], axes=[1], keepdims=0)], {"x": x3}, {}, 17
    yield "unsqueeze_squeeze", [n("Relu", ["x"], ["r"]), n("Unsqueeze", ["r", "a"], ["u"]), n("Relu", ["u"], ["ru"]),
                                n("Squeeze", ["ru", "a"], ["y"])], {"x": x3}, {"a": i64([0, 3])}, 17
    # Swin's shifted-window mask: built from constants (zeros, ScatterND,
    # Sub, Equal, Not, Where, Cast), folded at import, added to the input.
    mask = [n("ConstantOfShape", ["ms"], ["z"]), n("ScatterND", ["z", "mi", "mu"], ["m"]),
            n("Unsqueeze", ["m", "ax0"], ["ma"]), n("Unsqueeze", ["m", "ax1"], ["mb"]), n("Sub", ["ma", "mb"], ["d"]),
            n("Equal", ["d", "zero"], ["same"]), n("Not", ["same"], ["differ"]), n("Where", ["differ", "m100", "d"], ["w"]),
            n("Cast", ["same"], ["sf"], to=T.FLOAT), n("Add", ["w", "sf"], ["mk"]), n("Add", ["x", "mk"], ["y"])]
    yield "constant_mask_folded", mask, {"x": rng.standard_normal((4, 4, 4)).astype(np.float32)}, \
        {"ms": i64([4, 4]), "mi": i64([[0, 1], [2, 2], [3, 0]]), "mu": f32([1, 2, 3]), "ax0": i64([0]), "ax1": i64([1]),
         "zero": f32(0), "m100": f32(-100)}, 17
    # BERT's GELU as exported: x * 0.5 * (1 + erf(x / sqrt(2))).
    gelu = [n("Div", ["x", "r2"], ["q"]), n("Erf", ["q"], ["e"]), n("Add", ["e", "one"], ["e1"]), n("Mul", ["x", "e1"], ["m"]),
            n("Mul", ["m", "half"], ["y"])]
    yield "gelu_erf", gelu, {"x": x3}, {"r2": f32(1.4142135), "one": f32(1), "half": f32(0.5)}, 17


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    if not ensure_packages():
        return 77
    import numpy as np
    import onnx
    import onnx.numpy_helper as nh
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper

    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = total = 0
    for name, nodes, inputs, inits, opset in cases(np, helper, T, nh):
        total += 1
        try:
            d = os.path.join(work, name)
            os.makedirs(d)
            vis = [helper.make_tensor_value_info(k, T.FLOAT, v.shape) for k, v in inputs.items()]
            out = helper.make_tensor_value_info(nodes[-1].output[0], T.FLOAT, None)
            g = helper.make_graph(nodes, name, vis, [out], [nh.from_array(v, k) for k, v in inits.items()])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
            m = onnx.shape_inference.infer_shapes(m)
            onnx.checker.check_model(m, full_check=True)
            path = os.path.join(work, name + ".onnx")
            onnx.save(m, path)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            want = sess.run(None, inputs)[0]
            for i, (k, v) in enumerate(inputs.items()):
                with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
                    f.write(nh.from_array(v, k).SerializeToString())
            p = subprocess.run([exe, path, d], capture_output=True, text=True)
            if p.returncode != 0:
                raise AssertionError(f"run_model exit {p.returncode}: {p.stderr.strip()}")
            t = onnx.TensorProto()
            with open(os.path.join(d, "output_0.pb"), "rb") as f:
                t.ParseFromString(f.read())
            got = nh.to_array(t)
            if got.size != want.size:
                raise AssertionError(f"shape {got.shape}, ONNX Runtime {want.shape}")
            got = got.reshape(want.shape)
            err = relative_error(got, want)
            ok = err <= TOLERANCE
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: tsopt vs ONNX Runtime {ort.__version__}: rel err {err:.2e}")
        except Exception as e:
            failures += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
    print(f"{total - failures} of {total} operator cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
