#!/usr/bin/env python3
"""Issue #20: a full disk loses nothing.

Mounts a 256 KiB tmpfs (needs root; exit 77, meson: skipped, where mounting
is not allowed), puts an old file at the destination and runs `tsopt
optimize` on the bundled demo model, whose output (about 420 KB) does not
fit. Checks: exit 5 naming the destination, the old file intact, no
temporary left behind; then the same with --report on the full disk and the
model elsewhere (the model is written, the report fails, exit 5).

usage: full_disk.py TSOPT DEMO_MODEL WORKDIR
"""
import os
import subprocess
import sys


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 1
    tsopt, demo, work = argv[1:]
    mnt = os.path.join(work, "full")
    os.makedirs(mnt, exist_ok=True)
    if subprocess.run(["mountpoint", "-q", mnt]).returncode == 0:
        subprocess.run(["umount", mnt])
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt], capture_output=True, text=True)
    if m.returncode != 0:
        print(f"SKIP: cannot mount a small tmpfs here ({m.stderr.strip() or 'not root'})")
        return 77
    failures = []
    try:
        old = b"old destination\n" * 100
        out = os.path.join(mnt, "out.onnx")
        with open(out, "wb") as f:
            f.write(old)
        p = subprocess.run([tsopt, "optimize", demo, "-o", out, "--backend", "analytic", "--budget", "2"],
                           capture_output=True, text=True, timeout=300)
        print(f"-o on a full 256 KiB tmpfs: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        if p.returncode != 5:
            failures.append(f"-o on a full disk: exit {p.returncode}, expected 5")
        if out not in p.stderr and "out.onnx" not in p.stderr:
            failures.append("-o on a full disk: the message does not name the destination")
        with open(out, "rb") as f:
            if f.read() != old:
                failures.append("-o on a full disk: the old destination changed")
        left = [f for f in os.listdir(mnt) if f != "out.onnx"]
        if left:
            failures.append(f"-o on a full disk: left behind {left}")

        # The model fits elsewhere; the report does not (a filler takes the space).
        try:
            with open(os.path.join(mnt, "filler"), "wb") as f:
                f.write(b"\0" * (256 * 1024))
        except OSError:  # ENOSPC: the disk is full, as wanted
            pass
        model_out = os.path.join(work, "model_ok.onnx")
        report = os.path.join(mnt, "report.json")
        p = subprocess.run([tsopt, "optimize", demo, "-o", model_out, "--backend", "analytic", "--budget", "2",
                            "--report", report], capture_output=True, text=True, timeout=300)
        print(f"--report on a full tmpfs: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        if p.returncode != 5:
            failures.append(f"--report on a full disk: exit {p.returncode}, expected 5")
        if os.path.exists(report):
            failures.append("--report on a full disk: a partial report exists")
        left = [f for f in os.listdir(mnt) if f not in ("out.onnx", "filler")]
        if left:
            failures.append(f"--report on a full disk: left behind {left}")
    finally:
        subprocess.run(["umount", mnt])
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("full disk: exit 5, old destination intact, no partial file or temporary left")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
