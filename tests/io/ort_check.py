#!/usr/bin/env python3
"""Exported tsopt models are valid ONNX and compute what tsopt computes.

Runs tests/io/export_samples (the io sample nets and every zoo model at test
size, exported to ONNX with reference-backend inputs and outputs), then for
each model: onnx.checker.check_model(full_check=True), run it in ONNX Runtime,
compare with the reference backend (relative error <= 1e-4: max|a-b| / max|b|,
the project's measure; float32 summation order differs between the two).

Needs the PyPI packages onnx, onnxruntime and numpy; they are installed with
pip when missing. Exit 77 (meson: skipped) when they cannot be installed.
usage: ort_check.py EXPORT_SAMPLES_EXE WORKDIR
"""
import os
import subprocess
import sys

TOLERANCE = 1e-4


def ensure_packages(modules=("numpy", "onnx", "onnxruntime"), tag="ort_check"):
    """Imports `modules`, installing them with pip first when missing.

    The check and the install run under one lock per Python: the tests that
    call this run side by side (meson test --num-processes 2), and two pip
    installs into one site-packages, or an import while another process
    rewrites the libraries, killed a test with SIGBUS on a fresh machine."""
    import fcntl
    import hashlib
    import importlib
    import tempfile

    key = hashlib.sha256(sys.executable.encode()).hexdigest()[:16]
    with open(os.path.join(tempfile.gettempdir(), f"tsopt-pip-{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for m in modules:
                importlib.import_module(m)
            return True
        except ImportError:
            pass
        print(f"{tag}: installing {' '.join(modules)} with pip", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *modules], check=True, timeout=600)
            importlib.invalidate_caches()
            for m in modules:
                importlib.import_module(m)
            return True
        except Exception as e:  # no network, no wheel for this Python, ...
            print(f"SKIP: {'/'.join(modules)} unavailable and could not be installed ({e})")
            return False


def relative_error(got, want):
    """max|got - want| / max|want|, the project's measure (float64)."""
    import numpy as np
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(1e-6, float(np.max(np.abs(want)))))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    if not ensure_packages():
        return 77
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import onnxruntime as ort

    exe, work = sys.argv[1], sys.argv[2]
    subprocess.run([exe, work], check=True)
    names = sorted(f[:-5] for f in os.listdir(work) if f.endswith(".onnx"))
    failures = 0
    for name in names:
        path = os.path.join(work, name + ".onnx")
        try:
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            feeds = {}
            for i, inp in enumerate(sess.get_inputs()):
                t = onnx.TensorProto()
                with open(os.path.join(work, name, f"input_{i}.pb"), "rb") as f:
                    t.ParseFromString(f.read())
                feeds[inp.name] = onnx.numpy_helper.to_array(t)
            got = sess.run(None, feeds)
            worst = 0.0
            for i, g in enumerate(got):
                t = onnx.TensorProto()
                with open(os.path.join(work, name, f"output_{i}.pb"), "rb") as f:
                    t.ParseFromString(f.read())
                want = onnx.numpy_helper.to_array(t)
                if g.shape != want.shape:
                    raise AssertionError(f"output {i}: shape {g.shape}, reference {want.shape}")
                err = relative_error(g, want)
                worst = max(worst, err)
            status = "ok  " if worst <= TOLERANCE else "FAIL"
            failures += worst > TOLERANCE
            print(f"{status} {name}: checker passed, ONNX Runtime {ort.__version__} vs reference: rel err {worst:.2e}")
        except Exception as e:
            failures += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
    print(f"{len(names) - failures} of {len(names)} models pass")
    return 1 if failures or len(names) < 3 else 0


if __name__ == "__main__":
    sys.exit(main())
