#!/usr/bin/env python3
"""Issue #21: tsopt as a dependency, the ways a consumer takes it.

usage: consumers_test.py BUILD_ROOT SOURCE_ROOT WORK_DIR [TSOPT]

The build is installed (`meson install --destdir`) into WORK_DIR/stage, and
the README's library example (tests/cli/readme_example.cpp) is built from
there as an outside project would, then run on models/demo.onnx:
  1. pkg-config: g++ $(pkg-config --cflags --libs tsopt-onnx)
  2. Meson:      dependency('tsopt-onnx') through pkg-config
  3. CMake:      find_package(tsopt 0.1 REQUIRED COMPONENTS onnx), tsopt::onnx
  4. A Meson subproject (subprojects/tsopt -> this source tree): the
     subproject builds nothing (no tests, tools, Z3 run) and its headers are
     system headers (the consumer builds with -Werror at warning_level 3).
  5. Own rules: a Meson project whose build runs the installed tsopt-gen over
     its operators (relu, matmul) into its own namespace, and a program
     using that set beside the shipped one (own_rules_example.cpp).
  6. Own operators: a Meson project declaring its own operators and axioms
     (own_operators/myengine_ops.hpp), building its generator from the
     installed generator library (pkg-config tsopt-gen), generating and
     proving its rules at its build, and optimizing with them
     (own_operators/engine_example.cpp).
  7. The GPU backend, where the build has it (tsopt-cuda.pc installed):
     cuda_consumer_example.cpp built with pkg-config tsopt-cuda and with
     CMake's tsopt::cuda, each run: on a CUDA device it must match the
     reference; without one it exits 77 and only the build and link count.
Each written model is checked with `tsopt bench` (equal on random inputs)
when the tsopt command is given.
"""
import os
import pathlib
import shutil
import subprocess
import sys

BUILD, ROOT, WORK = (pathlib.Path(a).resolve() for a in sys.argv[1:4])
TSOPT = sys.argv[4] if len(sys.argv) > 4 else None
EXAMPLE = ROOT / "tests" / "cli" / "readme_example.cpp"
HERE = pathlib.Path(__file__).resolve().parent
DEMO = ROOT / "models" / "demo.onnx"
failures = []


def run(cmd, cwd=None, env=None, timeout=900):
    print("$", " ".join(str(c) for c in cmd), flush=True)
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return p


def step(name, cmd, **kw):
    p = run(cmd, **kw)
    if p.returncode != 0:
        print(p.stdout[-6000:])
        raise RuntimeError(f"{name}: `{' '.join(str(c) for c in cmd)}` exited {p.returncode}")
    return p.stdout


def check_example(name, exe, cwd):
    out = cwd / "demo.opt.onnx"
    text = step(name, [exe, DEMO, out], cwd=cwd, timeout=300)
    if "tsopt::optimize: cost" not in text or not out.is_file():
        print(text)
        raise RuntimeError(f"{name}: the README example printed no report or wrote no model")
    if TSOPT:
        step(name, [TSOPT, "bench", DEMO, out, "--reps", "1"], timeout=300)
    print(f"ok: {name}: the README example built, ran, and its output computes what the original computes")


def consumer(name, body):
    try:
        body()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}")
        failures.append(name)


shutil.rmtree(WORK, ignore_errors=True)
WORK.mkdir(parents=True)
stage = WORK / "stage"
step("install", ["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", stage])
pcs = sorted(stage.rglob("tsopt.pc"))
configs = sorted(stage.rglob("tsoptConfig.cmake"))
if not pcs or not configs or not list(stage.rglob("tsopt/optimize.hpp")) or not list(stage.rglob("tsopt/version.hpp")):
    print("FAIL: meson install did not install the headers, version.hpp, tsopt.pc and tsoptConfig.cmake")
    sys.exit(1)
pcdir = pcs[0].parent
prefix = configs[0].parents[3] if configs[0].parents[2].name == "lib" else configs[0].parents[4]
env = dict(os.environ, PKG_CONFIG_PATH=str(pcdir))
print(f"installed: {pcdir}, {configs[0]} (prefix {prefix})")
for tool in ("tsopt", "tsopt-gen"):
    if not list(stage.rglob(f"bin/{tool}")):
        failures.append(f"install of {tool}")
        print(f"FAIL: meson install did not install bin/{tool}")


def with_pkg_config():
    d = WORK / "pkg-config"
    d.mkdir()
    flags = step("pkg-config", ["pkg-config", "--cflags", "--libs", "tsopt-onnx"], env=env).split()
    step("pkg-config", ["c++", "-std=c++20", "-O1", EXAMPLE, "-o", d / "example", *flags], cwd=d)
    check_example("pkg-config", d / "example", d)


def with_meson():
    d = WORK / "meson"
    d.mkdir()
    shutil.copy(EXAMPLE, d / "example.cpp")
    (d / "meson.build").write_text(
        "project('tsopt-consumer', 'cpp', default_options : ['cpp_std=c++20', 'optimization=1'])\n"
        "executable('example', 'example.cpp', dependencies : dependency('tsopt-onnx', version : '>=0.1'))\n")
    step("meson", ["meson", "setup", d / "build", d], env=env)
    step("meson", ["ninja", "-C", d / "build"], env=env)
    check_example("meson", d / "build" / "example", d)


def with_cmake():
    d = WORK / "cmake"
    d.mkdir()
    shutil.copy(EXAMPLE, d / "example.cpp")
    (d / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\n"
        "project(tsopt_consumer CXX)\n"
        "find_package(tsopt 0.1 REQUIRED COMPONENTS onnx)\n"
        "add_executable(example example.cpp)\n"
        "target_compile_options(example PRIVATE -O1 -Wall -Wextra -Werror)\n"
        "target_link_libraries(example PRIVATE tsopt::onnx)\n")
    step("cmake", ["cmake", "-S", d, "-B", d / "build", f"-DCMAKE_PREFIX_PATH={prefix}"])
    step("cmake", ["cmake", "--build", d / "build"])
    check_example("cmake", d / "build" / "example", d)


def as_subproject():
    d = WORK / "subproject"
    (d / "subprojects").mkdir(parents=True)
    os.symlink(ROOT, d / "subprojects" / "tsopt")
    shutil.copy(EXAMPLE, d / "example.cpp")
    (d / "meson.build").write_text(
        "project('tsopt-consumer', 'cpp',\n"
        "  default_options : ['cpp_std=c++20', 'optimization=1', 'warning_level=3', 'werror=true'])\n"
        "subproject('tsopt')\n"
        "executable('example', 'example.cpp', dependencies : dependency('tsopt-onnx'))\n")
    # No PKG_CONFIG_PATH: the dependency comes from the subproject's override.
    step("subproject", ["meson", "setup", d / "build", d])
    step("subproject", ["ninja", "-C", d / "build"])
    sub = d / "build" / "subprojects" / "tsopt"
    built = [p for p in sub.rglob("*") if p.is_file() and (os.access(p, os.X_OK) or p.suffix in (".a", ".so", ".o"))]
    if built:
        raise RuntimeError("subproject: tsopt built targets the consumer did not ask for: " +
                           ", ".join(str(p.relative_to(sub)) for p in built[:10]))
    print("ok: subproject: tsopt built nothing of its own")
    check_example("subproject", d / "build" / "example", d)


def own_rules():
    d = WORK / "own-rules"
    d.mkdir()
    shutil.copy(HERE / "own_rules_example.cpp", d / "example.cpp")
    (d / "meson.build").write_text(
        "project('engine-rules', 'cpp', default_options : ['cpp_std=c++20', 'optimization=1'])\n"
        "# The engine's rule set, generated and proven by Z3 at its build time.\n"
        "own_rules = custom_target('own_rules', output : 'own_rules.hpp',\n"
        "  command : [find_program('tsopt-gen'), '--ops', 'relu,matmul', '--max-ops', '2', '--threads', '2',\n"
        "             '--quiet', '--namespace', 'myengine::rules', '--header', '@OUTPUT@'])\n"
        "executable('example', 'example.cpp', own_rules, dependencies : dependency('tsopt'))\n")
    genv = dict(env, PATH=str(prefix / "bin") + os.pathsep + os.environ.get("PATH", ""))
    step("own rules", ["meson", "setup", d / "build", d], env=genv)
    step("own rules", ["ninja", "-C", d / "build"], env=genv)
    print(step("own rules", [d / "build" / "example"], cwd=d))
    print("ok: own rules: tsopt-gen ran at the consumer's build, both sets in one program, the own set applied")


def own_operators():
    if not list(stage.rglob("tsopt-gen.pc")):
        raise RuntimeError("own operators: meson install did not install tsopt-gen.pc (the generator as a library)")
    d = WORK / "own-operators"
    d.mkdir()
    src = HERE / "own_operators"
    for f in ("myengine_ops.hpp", "myengine_gen.cpp", "engine_example.cpp"):
        shutil.copy(src / f, d / f)
    (d / "meson.build").write_text(
        "project('engine-operators', 'cpp', default_options : ['cpp_std=c++20', 'optimization=1'])\n"
        "# The engine's generator: tsopt-gen's command line with its operators and axioms registered.\n"
        "engine_gen = executable('engine-gen', 'myengine_gen.cpp', dependencies : dependency('tsopt-gen'))\n"
        "own_rules = custom_target('myengine_rules', output : 'myengine_rules.hpp',\n"
        "  command : [engine_gen, '--ops', 'neg,sub,ewadd,matmul', '--max-ops', '2', '--representative-params',\n"
        "             '--distinct-operands', '--distinct-values', '--threads', '2', '--quiet',\n"
        "             '--namespace', 'myengine::rules', '--header', '@OUTPUT@'])\n"
        "executable('example', 'engine_example.cpp', own_rules, dependencies : dependency('tsopt'))\n")
    step("own operators", ["meson", "setup", d / "build", d], env=env)
    step("own operators", ["ninja", "-C", d / "build"], env=env)
    print(step("own operators", [d / "build" / "example"], cwd=d))
    print("ok: own operators: the engine's operators and axioms, its generator built from the installed library, "
          "its rules proven at its build and applied")


def gpu_backend():
    if not list(stage.rglob("tsopt-cuda.pc")):
        print("skipped: GPU backend consumers: this build has no CUDA backend (no tsopt-cuda.pc)")
        return
    example = HERE / "cuda_consumer_example.cpp"
    d = WORK / "cuda"
    d.mkdir()
    flags = step("cuda pkg-config", ["pkg-config", "--cflags", "--libs", "tsopt-cuda"], env=env).split()
    step("cuda pkg-config", ["c++", "-std=c++20", "-O1", example, "-o", d / "example", *flags], cwd=d)
    (d / "cmake").mkdir()
    shutil.copy(example, d / "cmake" / "example.cpp")
    (d / "cmake" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\n"
        "project(tsopt_cuda_consumer CXX)\n"
        "find_package(tsopt 0.1 REQUIRED COMPONENTS cuda)\n"
        "add_executable(example example.cpp)\n"
        "target_compile_options(example PRIVATE -O1 -Wall -Wextra -Werror)\n"
        "target_link_libraries(example PRIVATE tsopt::cuda)\n")
    step("cuda cmake", ["cmake", "-S", d / "cmake", "-B", d / "cmake" / "build", f"-DCMAKE_PREFIX_PATH={prefix}"])
    step("cuda cmake", ["cmake", "--build", d / "cmake" / "build"])
    for how, exe in (("pkg-config", d / "example"), ("cmake", d / "cmake" / "build" / "example")):
        p = run([exe], cwd=d, timeout=600)
        print(p.stdout.strip())
        if p.returncode == 77:
            print(f"ok: GPU backend via {how}: built and linked; not run: no CUDA device here")
        elif p.returncode == 0:
            print(f"ok: GPU backend via {how}: ran on the device and matched the reference")
        else:
            raise RuntimeError(f"GPU backend via {how}: the example exited {p.returncode}")


consumer("pkg-config", with_pkg_config)
consumer("meson", with_meson)
consumer("cmake", with_cmake)
consumer("subproject", as_subproject)
consumer("own rules", own_rules)
consumer("own operators", own_operators)
consumer("GPU backend", gpu_backend)
if failures:
    print("FAILED: " + ", ".join(failures))
    sys.exit(1)
print("all consumers built and ran: pkg-config, Meson, CMake, subproject, own rules, own operators, GPU backend (where built)")
