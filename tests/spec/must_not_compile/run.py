#!/usr/bin/env python3
"""Must-not-compile tests for the axiom DSL (Halide's test/error).

Each source file names, in a `// expect: <sentence>` line, the sentence its
misuse must produce. A case passes when
  1. the file compiles with -DTSOPT_CONTROL (the same program without the
     misuse: proves the failure below comes from the misuse, not from a typo
     or a missing header), and
  2. without it, compilation fails and the diagnostic contains the sentence.

usage: run.py --include DIR FILE... -- COMPILER [ARGS...]
"""
import argparse
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def expected_sentence(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("// expect:"):
                return line[len("// expect:"):].strip()
    return None


def compile_(cxx, include, path, control):
    cmd = cxx + ["-fsyntax-only", "-std=c++20", "-I", include, path]
    if control:
        cmd.insert(len(cxx), "-DTSOPT_CONTROL")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def check(cxx, include, path):
    """Returns (ok, message)."""
    sentence = expected_sentence(path)
    if not sentence:
        return False, f"{path}: no `// expect: <sentence>` line"
    rc, out = compile_(cxx, include, path, control=True)
    if rc != 0:
        return False, f"{path}: the control program (-DTSOPT_CONTROL) does not compile:\n{out}"
    rc, out = compile_(cxx, include, path, control=False)
    if rc == 0:
        return False, f"{path}: compiled, but must fail with \"{sentence}\""
    if sentence not in out:
        return False, f"{path}: failed to compile, but the diagnostic lacks \"{sentence}\":\n{out}"
    return True, f"{path}: fails with \"{sentence}\""


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: run.py --include DIR FILE... -- COMPILER [ARGS...]")
    split = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--include", required=True)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv[:split])
    cxx = argv[split + 1:]
    if not cxx:
        sys.exit("run.py: no compiler after --")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda f: check(cxx, args.include, f), args.files))
    failed = 0
    for ok, msg in results:
        print(("PASS " if ok else "FAIL ") + msg)
        failed += not ok
    print(f"{len(results) - failed}/{len(results)} must-not-compile cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
