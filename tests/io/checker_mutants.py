#!/usr/bin/env python3
"""Issue #20: tsopt accepts no model that onnx.checker (full check) rejects.

Mutates valid seed models (the fuzz corpus's .onnx files and the bundled
demo) at the protobuf level, deterministically from a fixed seed: attribute
values, node inputs and outputs, operator types, graph-input extents and
element types, initializer shapes, opsets, node order, graph outputs. For
each mutant, onnx.checker.check_model(full_check=True) decides whether it is
valid, and `tsopt inspect` whether tsopt accepts it (exit 0) or refuses it as
bad input (exit 2). It fails when tsopt accepts a mutant the checker
rejects, or exits with anything but 0 or 2 (a crash or an internal error).
Mutants the checker accepts and tsopt refuses are counted, not failures
(tsopt supports a subset of ONNX).

Needs the PyPI package onnx (installed with pip when missing); exit 77
(meson: skipped) when it cannot be had.
usage: checker_mutants.py TSOPT WORKDIR SEED_MODEL_OR_DIR... [--per-seed N] [--seed S]
(a directory stands for the .onnx files in it)
"""
import copy
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_check import ensure_packages  # noqa: E402


def mutations(onnx):
    """Each takes (model, rng) and returns a description, or None when it
    does not apply to this model."""
    from onnx import AttributeProto, TensorProto

    def nodes(m):
        return list(m.graph.node)

    def attr_value(m, rng):
        cands = [(n, a) for n in m.graph.node for a in n.attribute
                 if a.type in (AttributeProto.INT, AttributeProto.INTS)]
        if not cands:
            return None
        n, a = rng.choice(cands)
        v = rng.choice([0, -1, -7, 2, 3, 1 << 31, (1 << 62)])
        if a.type == AttributeProto.INT:
            a.i = v
        elif a.ints:
            a.ints[rng.randrange(len(a.ints))] = v
        else:
            return None
        return f"{n.op_type}.{a.name} = {v}"

    def attr_type(m, rng):
        cands = [(n, a) for n in m.graph.node for a in n.attribute if a.type == AttributeProto.INTS]
        if not cands:
            return None
        n, a = rng.choice(cands)
        vals = list(a.ints)
        a.ClearField("ints")
        a.type = AttributeProto.FLOATS
        a.floats.extend(float(v) for v in vals)
        return f"{n.op_type}.{a.name} as floats"

    def attr_drop_ints(m, rng):
        cands = [(n, a) for n in m.graph.node for a in n.attribute if a.type == AttributeProto.INTS and len(a.ints) > 1]
        if not cands:
            return None
        n, a = rng.choice(cands)
        del a.ints[-1]
        return f"{n.op_type}.{a.name} one entry short"

    def undefined_input(m, rng):
        ns = [n for n in nodes(m) if n.input]
        if not ns:
            return None
        n = rng.choice(ns)
        i = rng.randrange(len(n.input))
        n.input[i] = "no_such_tensor"
        return f"{n.op_type} input {i} undefined"

    def drop_input(m, rng):
        ns = [n for n in nodes(m) if n.input]
        if not ns:
            return None
        n = rng.choice(ns)
        del n.input[-1]
        return f"{n.op_type} loses its last input"

    def extra_input(m, rng):
        ns = nodes(m)
        if not ns or not m.graph.input:
            return None
        n = rng.choice(ns)
        n.input.append(m.graph.input[0].name)
        return f"{n.op_type} gets an extra input"

    def op_type(m, rng):
        ns = nodes(m)
        if not ns:
            return None
        n = rng.choice(ns)
        new = rng.choice(["Relu", "Conv", "MatMul", "Add", "Concat", "Gemm", "Softmax", "Transpose", "NoSuchOp"])
        if new == n.op_type:
            return None
        old, n.op_type = n.op_type, new
        return f"{old} -> {new}"

    def duplicate_output(m, rng):
        ns = nodes(m)
        if len(ns) < 2:
            return None
        a, b = rng.sample(ns, 2)
        if not a.output or not b.output:
            return None
        b.output[0] = a.output[0]
        return f"{b.op_type} writes {a.op_type}'s output"

    def input_extent(m, rng):
        ins = [i for i in m.graph.input if i.type.tensor_type.shape.dim]
        if not ins:
            return None
        i = rng.choice(ins)
        dims = i.type.tensor_type.shape.dim
        k = rng.randrange(len(dims))
        v = rng.choice([0, -1, 1 << 40, 3, 5])
        dims[k].Clear()
        dims[k].dim_value = v
        return f"input {i.name} dim {k} = {v}"

    def input_rank(m, rng):
        ins = [i for i in m.graph.input if i.type.tensor_type.shape.dim]
        if not ins:
            return None
        i = rng.choice(ins)
        del i.type.tensor_type.shape.dim[-1]
        return f"input {i.name} loses a dimension"

    def elem_type(m, rng):
        ins = list(m.graph.input) + list(m.graph.initializer)
        if not ins:
            return None
        x = rng.choice(ins)
        t = rng.choice([TensorProto.INT64, TensorProto.DOUBLE, TensorProto.UNDEFINED, 77])
        if hasattr(x, "data_type"):
            x.data_type = t
        else:
            x.type.tensor_type.elem_type = t
        return f"{x.name} element type {t}"

    def initializer_dims(m, rng):
        if not m.graph.initializer:
            return None
        t = rng.choice(list(m.graph.initializer))
        if not t.dims:
            return None
        k = rng.randrange(len(t.dims))
        t.dims[k] = t.dims[k] + rng.choice([1, 5, -t.dims[k]])
        return f"initializer {t.name} dim {k} = {t.dims[k]}"

    def opset(m, rng):
        if not m.opset_import:
            return None
        v = rng.choice([0, 1, 5, 99])
        m.opset_import[0].version = v
        return f"opset {v}"

    def node_order(m, rng):
        ns = nodes(m)
        if len(ns) < 2:
            return None
        rev = list(reversed(ns))
        del m.graph.node[:]
        m.graph.node.extend(rev)
        return "nodes in reverse order"

    def graph_output(m, rng):
        if not m.graph.output:
            return None
        o = rng.choice(list(m.graph.output))
        o.name = "no_such_output"
        return "graph output names an undefined tensor"

    def empty_name(m, rng):
        ns = [n for n in nodes(m) if n.output]
        if not ns:
            return None
        n = rng.choice(ns)
        n.output[0] = ""
        return f"{n.op_type} output has an empty name"

    return [attr_value, attr_type, attr_drop_ints, undefined_input, drop_input, extra_input, op_type,
            duplicate_output, input_extent, input_rank, elem_type, initializer_dims, opset, node_order,
            graph_output, empty_name]


def main(argv):
    per_seed, seed = 40, 20261126
    args = []
    it = iter(argv[1:])
    for a in it:
        if a == "--per-seed":
            per_seed = int(next(it))
        elif a == "--seed":
            seed = int(next(it))
        else:
            args.append(a)
    if len(args) < 3:
        print(__doc__)
        return 1
    tsopt, work = args[0], args[1]
    seeds = []
    for a in args[2:]:
        seeds += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".onnx")) if os.path.isdir(a) else [a]
    if not ensure_packages(("onnx",), "checker_mutants"):
        return 77
    import onnx

    os.makedirs(work, exist_ok=True)
    rng = random.Random(seed)
    muts = mutations(onnx)
    total = checker_rejects = accepted_invalid = refused_valid = 0
    crashes, bad = [], []
    for path in seeds:
        base = onnx.load(path)
        try:
            onnx.checker.check_model(base, full_check=True)
        except Exception as e:  # noqa: BLE001 - a seed must be valid
            print(f"seed {path} is not valid ONNX: {e}")
            return 1
        for k in range(per_seed):
            m = copy.deepcopy(base)
            # One or two mutations per mutant.
            what = []
            for _ in range(rng.choice([1, 1, 2])):
                d = rng.choice(muts)(m, rng)
                if d:
                    what.append(d)
            if not what:
                continue
            total += 1
            f = os.path.join(work, f"mutant_{os.path.basename(path)}_{k}.onnx")
            with open(f, "wb") as out:
                out.write(m.SerializeToString())
            try:
                onnx.checker.check_model(m, full_check=True)
                valid, why = True, ""
            except Exception as e:  # noqa: BLE001 - any checker failure marks the mutant invalid
                valid, why = False, str(e).strip().splitlines()[0][:160]
            checker_rejects += not valid
            p = subprocess.run([tsopt, "inspect", f], capture_output=True, text=True, timeout=60)
            tag = f"{os.path.basename(path)} #{k} ({'; '.join(what)})"
            if p.returncode not in (0, 2):
                crashes.append(f"{tag}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
            elif p.returncode == 0 and not valid:
                accepted_invalid += 1
                bad.append(f"{tag}: tsopt accepts it, onnx.checker says: {why}")
            elif p.returncode == 2 and valid:
                refused_valid += 1
            if p.returncode in (0, 2):
                os.remove(f)
    print(f"{total} mutants of {len(seeds)} seed models: onnx.checker (full check) rejects {checker_rejects}; "
          f"tsopt accepts {accepted_invalid} of those; refuses {refused_valid} the checker accepts (unsupported); "
          f"{len(crashes)} crashes or internal errors")
    for b in bad:
        print("ACCEPTED INVALID:", b)
    for c in crashes:
        print("CRASH:", c)
    return 1 if bad or crashes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
