#!/usr/bin/env python3
"""`tsopt optimize` on models exported from PyTorch, checked with ONNX Runtime.

usage: models_test.py TSOPT WORK_DIR

1. A model with an operator no backend implements (Celu between two convs,
   built here): optimize exits 0, cuts the operator out of timing and
   verification and says so on stdout and in the report; bench exits 0. The
   same for a custom-domain operator named like a standard one (Clip).
2. Every *.onnx in $TSOPT_REAL_MODELS (default /tmp/models: the set
   bench/export_models.py writes: torchvision backbones, a BERT encoder):
   optimize with the default backend exits 0, and ONNX Runtime computes the
   same outputs (relative error <= 1e-4) from the written model as from the
   original on random inputs. Skipped with a message when the folder is
   missing.

Needs the PyPI packages onnx, onnxruntime, numpy (exit 77 when unavailable).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "io"))
from ort_check import TOLERANCE, ensure_packages, relative_error  # noqa: E402

TSOPT, WORK = sys.argv[1:3]
failures = []


def expect(name, cond, detail=""):
    print(f"[{'ok' if cond else 'FAIL'}] {name}" + (f": {detail}" if detail and not cond else ""), flush=True)
    if not cond:
        failures.append(name)


def run(*args, timeout=900):
    return subprocess.run([TSOPT, *args], capture_output=True, text=True, timeout=timeout)


def ort_agree(np, ort, original, optimized):
    a = ort.InferenceSession(original, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(optimized, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in a.get_inputs()}
    want, got = a.run(None, feeds), b.run(None, feeds)
    if len(want) != len(got):
        return float("inf")
    return max(relative_error(g, w) for g, w in zip(got, want))


def unimplemented_operator(np, onnx, ort):
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    rng = np.random.default_rng(1)
    w1 = nh.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w1")
    w2 = nh.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32) * 0.3, "w2")
    nodes = [h.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Celu", ["r"], ["u"], alpha=0.7), h.make_node("Conv", ["u", "w2"], ["c2"]),
             h.make_node("Relu", ["c2"], ["y"])]
    g = h.make_graph(nodes, "celu", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 16, 16])], [w1, w2])
    path, out, rep = (os.path.join(WORK, f) for f in ("celu.onnx", "celu.opt.onnx", "celu.json"))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    p = run("optimize", path, "-o", out, "--budget", "1", "--reps", "2", "--report", rep)
    expect("unimplemented Celu: optimize exits 0", p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:])
    expect("unimplemented Celu: stdout says what was cut out", "Celu have no implementation" in p.stdout, p.stdout[-2000:])
    if p.returncode == 0:
        r = json.load(open(rep))
        expect("unimplemented Celu: report lists it", r["verification"]["cut_out_unimplemented"] == ["Celu"], str(r["verification"]))
        err = ort_agree(np, ort, path, out)
        expect("unimplemented Celu: ONNX Runtime agrees", err <= TOLERANCE, f"rel err {err:.2e}")
        p = run("bench", path, out, "--reps", "2")
        expect("unimplemented Celu: bench exits 0", p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:])


def custom_domain_operator(np, onnx):
    """A custom-domain operator that reuses a standard type name is not run
    with the standard operator's implementation: it is cut out and named."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    w = nh.from_array(np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Clip", ["c"], ["k"], domain="com.example"), h.make_node("Relu", ["k"], ["y"])]
    g = h.make_graph(nodes, "custom", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], [w],
                     value_info=[h.make_tensor_value_info("k", T.FLOAT, [1, 4, 8, 8])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)])
    path, out, rep = (os.path.join(WORK, f) for f in ("custom.onnx", "custom.opt.onnx", "custom.json"))
    onnx.save(m, path)
    p = run("optimize", path, "-o", out, "--budget", "1", "--reps", "2", "--report", rep)
    expect("custom-domain Clip: optimize exits 0", p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:])
    if p.returncode == 0:
        cut = json.load(open(rep))["verification"]["cut_out_unimplemented"]
        expect("custom-domain Clip: cut out by its domain-qualified name", cut == ["com.example.Clip"], str(cut))


def real_models(np, ort):
    folder = os.environ.get("TSOPT_REAL_MODELS", "/tmp/models")
    models = sorted(glob.glob(os.path.join(folder, "*.onnx")))
    if not models:
        print(f"SKIP real models: no *.onnx in {folder} (write them with bench/export_models.py, or set TSOPT_REAL_MODELS)")
        return
    for path in models:
        name = os.path.basename(path)[:-5]
        out = os.path.join(WORK, name + ".opt.onnx")
        p = run("optimize", path, "-o", out, "--budget", "2", "--reps", "2", "--top-k", "1")
        expect(f"{name}: optimize exits 0", p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:])
        if p.returncode == 0:
            err = ort_agree(np, ort, path, out)
            expect(f"{name}: ONNX Runtime agrees on the optimized model", err <= TOLERANCE, f"rel err {err:.2e}")


def main():
    if not ensure_packages():
        return 77
    import numpy as np
    import onnx
    import onnxruntime as ort
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    unimplemented_operator(np, onnx, ort)
    custom_domain_operator(np, onnx)
    real_models(np, ort)
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("all checks pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
