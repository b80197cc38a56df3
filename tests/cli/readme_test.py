#!/usr/bin/env python3
"""The README's usage example is tests/cli/readme_example.cpp, verbatim, and it runs.

usage: readme_test.py README_EXAMPLE TSOPT SOURCE_ROOT WORK_DIR

1. The ```cpp block after the marker `<!-- readme_example.cpp -->` in README.md
   must equal tests/cli/readme_example.cpp (edit both together).
2. The compiled example optimizes models/demo.onnx and writes a model that
   `tsopt bench` finds equal to the original on random inputs.
"""
import os
import re
import shutil
import subprocess
import sys

EXAMPLE, TSOPT, ROOT, WORK = sys.argv[1:5]
failed = False

with open(os.path.join(ROOT, "README.md")) as f:
    readme = f.read()
with open(os.path.join(ROOT, "tests", "cli", "readme_example.cpp")) as f:
    source = f.read()
m = re.search(r"<!-- readme_example\.cpp -->\s*```cpp\n(.*?)```", readme, re.S)
if not m:
    print("FAIL: README.md has no ```cpp block after <!-- readme_example.cpp -->")
    failed = True
elif m.group(1).strip() != source.strip():
    print("FAIL: the README's usage example differs from tests/cli/readme_example.cpp; keep them equal")
    import difflib

    sys.stdout.writelines(difflib.unified_diff(m.group(1).strip().splitlines(True), source.strip().splitlines(True),
                                               "README.md", "tests/cli/readme_example.cpp"))
    print()
    failed = True
else:
    print("ok: README example == tests/cli/readme_example.cpp")

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
demo = os.path.join(ROOT, "models", "demo.onnx")
out = os.path.join(WORK, "demo.opt.onnx")
p = subprocess.run([EXAMPLE, demo, out], capture_output=True, text=True, timeout=100)
print(p.stdout + p.stderr)
if p.returncode != 0 or "tsopt::optimize: cost" not in p.stdout or not os.path.isfile(out):
    print(f"FAIL: the README example exited {p.returncode} or wrote no model")
    failed = True
else:
    b = subprocess.run([TSOPT, "bench", demo, out, "--reps", "1"], capture_output=True, text=True, timeout=100)
    print(b.stdout + b.stderr)
    if b.returncode != 0:
        print(f"FAIL: tsopt bench on the README example's output exited {b.returncode}")
        failed = True
    else:
        print("ok: the README example's output computes what the original computes")
sys.exit(1 if failed else 0)
