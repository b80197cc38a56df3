#!/usr/bin/env python3
"""Issue #21: `pip install .` gives `import tsopt` in a fresh virtual environment.

usage: python_package_test.py SOURCE_ROOT WORK_DIR [PYTHON]

Creates WORK_DIR/venv (with PYTHON, default /usr/bin/python3), installs the
repository into it with pip (meson-python builds the nanobind extension in
WORK_DIR/build; build dependencies and onnx come from PyPI), then, outside
the source tree's python/ folder:
  - python -c "import tsopt; tsopt.optimize('models/demo.onnx')" (the
    issue's one-liner, defaults: the oneDNN backend, the generated rules);
  - the result is an onnx.ModelProto that onnx.checker accepts, the report
    dict names the input and says the outputs are equal, tsopt.rules() lists
    the proven rules, and a missing file raises tsopt.Error with exit code 2.
Exit 77 (meson: skipped) when PyPI cannot be reached or no venv can be made.
"""
import os
import shutil
import subprocess
import sys

ROOT, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
PYTHON = sys.argv[3] if len(sys.argv) > 3 else ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
SKIP = 77


def run(cmd, timeout, cwd=None):
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
venv = os.path.join(WORK, "venv")
p = run([PYTHON, "-m", "venv", venv], 300)
if p.returncode != 0:
    print(p.stdout)
    print(f"SKIP: cannot create a virtual environment with {PYTHON} (Debian: python3-venv)")
    sys.exit(SKIP)
vpy = os.path.join(venv, "bin", "python")
probe = run([vpy, "-m", "pip", "download", "--quiet", "--no-deps", "-d", os.path.join(WORK, "probe"), "nanobind"], 300)
if probe.returncode != 0:
    print(probe.stdout)
    print("SKIP: PyPI cannot be reached (pip install . needs meson-python, nanobind and onnx from it)")
    sys.exit(SKIP)

p = run([vpy, "-m", "pip", "install", "--quiet", f"--config-settings=build-dir={os.path.join(WORK, 'build')}", ROOT], 3000)
if p.returncode != 0:
    print(p.stdout[-8000:])
    print("FAIL: pip install . failed")
    sys.exit(1)
print("ok: pip install . built and installed the package")

# The one-liner, as a user types it, from the repository root (so
# models/demo.onnx resolves) where `tsopt` is not an importable folder.
p = run([vpy, "-c", "import tsopt; tsopt.optimize('models/demo.onnx')"], 600, cwd=ROOT)
if p.returncode != 0:
    print(p.stdout)
    print("FAIL: python -c \"import tsopt; tsopt.optimize('models/demo.onnx')\" failed")
    sys.exit(1)
print("ok: python -c \"import tsopt; tsopt.optimize('models/demo.onnx')\"")

check = r'''
import os, sys, onnx, tsopt
assert os.path.dirname(tsopt.__file__).startswith(sys.prefix), f"tsopt imported from {tsopt.__file__}, not the venv"
demo = os.path.join(sys.argv[1], "models", "demo.onnx")
model, report = tsopt.optimize(demo, budget=2, backend="analytic", report=True)
assert isinstance(model, onnx.ModelProto), type(model)
onnx.checker.check_model(model, full_check=True)
assert report["input"] == demo, report["input"]
assert report["verification"]["equal"] is True, report["verification"]
assert report["rewrites"]["count"] > 0, report["rewrites"]
rebuilt = tsopt.replay(demo, report)   # the report's rewrites rebuild what optimize returned
assert rebuilt.SerializeToString() == model.SerializeToString(), "tsopt.replay rebuilt another model"
again = tsopt.optimize(onnx.load(demo), budget=1, backend="analytic")   # a ModelProto in
assert [i.name for i in again.graph.input] == [i.name for i in onnx.load(demo).graph.input]
rules = tsopt.rules()
assert len(rules) > 100 and all("Z3" in r.provenance for r in rules), (len(rules), rules[:1])
try:
    tsopt.optimize(os.path.join(sys.argv[1], "no-such-model.onnx"))
    raise AssertionError("a missing model did not raise")
except tsopt.Error as e:
    assert e.exit_code == 2 and "no such file" in str(e), (e.exit_code, str(e))
print(f"tsopt {tsopt.__version__}: {len(model.graph.node)} nodes out, {len(rules)} rules, report keys {sorted(report)}")
'''
p = run([vpy, "-c", check, ROOT], 600, cwd=WORK)
print(p.stdout)
if p.returncode != 0:
    print("FAIL: the package's API checks failed")
    sys.exit(1)
print("ok: tsopt.optimize (path and ModelProto), the report dict, tsopt.replay, tsopt.rules(), tsopt.Error")
