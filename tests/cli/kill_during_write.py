#!/usr/bin/env python3
"""Issue #20: kill -9 at random points of `tsopt optimize` loses nothing.

A model with 64 MiB of weights makes the write of the optimized model take
a while. One uninterrupted run gives the reference output, the run's length
and how long the write's temporary file exists. Each trial puts an old file
at the destination, starts the same command and sends SIGKILL: every other
trial at a random moment of the whole run, the others at a random moment
of the write (once the temporary appears). The moments are seeded. Checks:
  - the destination holds either the old bytes or exactly the reference
    output (never a partial or corrupt file);
  - the input model is unchanged.
Temporaries a kill leaves behind (`.NAME.tmp.PID.N`, tsopt's atomic write)
are counted; the next write of the destination must remove them (their
process is gone), and they never replace the destination.

usage: kill_during_write.py TSOPT WORKDIR [--trials N] [--seed S]
Exit 77 (meson: skipped) without numpy and onnx.
"""
import hashlib
import os
import random
import signal
import subprocess
import sys
import time


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv):
    trials, seed = 20, 20261126
    args = []
    it = iter(argv[1:])
    for a in it:
        if a == "--trials":
            trials = int(next(it))
        elif a == "--seed":
            seed = int(next(it))
        else:
            args.append(a)
    if len(args) != 2:
        print(__doc__)
        return 1
    tsopt, work = args
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        print(f"SKIP: numpy/onnx unavailable ({e})")
        return 77
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "big.onnx")
    rng_np = np.random.default_rng(1)
    w = numpy_helper.from_array(rng_np.standard_normal((4096, 4096), dtype=np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4096])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                          "big", [x], [y], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    model_hash = sha(model)
    out = os.path.join(work, "out.onnx")
    cmd = [tsopt, "optimize", model, "-o", out, "--backend", "analytic", "--budget", "5"]

    def temporary():
        return any(f.startswith(".out.onnx.tmp.") for f in os.listdir(work))

    # The reference: one run to the end, timing the write (the temporary's life).
    if os.path.exists(out):
        os.remove(out)
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    write_start = write_end = None
    while proc.poll() is None:
        if temporary():
            write_start = write_start or time.time()
        elif write_start and not write_end:
            write_end = time.time()
        time.sleep(0.001)
    length = time.time() - t0
    err = proc.stderr.read()
    if proc.returncode != 0:
        print(f"reference run failed (exit {proc.returncode}): {err[-500:]}")
        return 1
    write = (write_end or time.time()) - write_start if write_start else 0.0
    ref = sha(out)
    print(f"reference run: {length:.2f} s, output {os.path.getsize(out)} bytes, written in {write:.3f} s")

    old = b"old content of the destination, not an ONNX model\n" * 1000
    old_hash = hashlib.sha256(old).hexdigest()
    rng = random.Random(seed)
    kept_old = complete_new = bad = finished = 0
    seen_temps = set()
    failures = []
    for k in range(trials):
        with open(out, "wb") as f:
            f.write(old)
        during_write = k % 2 == 1 and write > 0
        delay = rng.uniform(0.0, write * 1.2) if during_write else rng.uniform(0.0, length * 1.1)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if during_write:
            deadline = time.time() + 120
            while proc.poll() is None and not temporary() and time.time() < deadline:
                time.sleep(0.0005)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        else:
            finished += 1
        proc.wait()
        h = sha(out)
        if h == old_hash:
            kept_old += 1
        elif h == ref:
            complete_new += 1
        else:
            bad += 1
            failures.append(f"trial {k} (kill {delay:.3f} s after {'the write began' if during_write else 'the start'}): destination is neither the old file nor the complete output "
                            f"({os.path.getsize(out)} bytes)")
        if sha(model) != model_hash:
            failures.append(f"trial {k}: the input model changed")
            break
        seen_temps.update(f for f in os.listdir(work) if f.startswith(".out.onnx.tmp."))
    # One more run to the end: it removes the temporaries of the killed runs.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    left = [f for f in os.listdir(work) if f.startswith(".out.onnx.tmp.")]
    if p.returncode != 0 or sha(out) != ref:
        failures.append(f"the run after the trials failed (exit {p.returncode}) or wrote another output")
    if left:
        failures.append(f"temporaries of killed runs still there after the next write: {left}")
    print(f"{trials} kill -9 trials (half during the {write:.3f} s write) of a {length:.2f} s run: destination kept the old file "
          f"{kept_old} times, held the complete output {complete_new} times, anything else {bad} times; "
          f"{finished} runs ended before the kill; {len(seen_temps)} temporaries seen after a kill, all removed by the next run's write; input unchanged")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
