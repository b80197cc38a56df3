#!/usr/bin/python3
"""Exports the real-model benchmark set to ONNX, as a new user would.

    /usr/bin/python3 bench/export_models.py OUTDIR [--opset 17] [--set issue|torchvision|all] [--only NAME,...]

torchvision classification models (random weights, batch 1, eval mode) and
a BERT-style encoder written with plain PyTorch ops (LayerNorm, GELU,
attention by matmul + softmax), exported by torch.onnx at the given opset.
Runs on Debian's python3-torch / python3-torchvision (for /usr/bin/python3:
`apt-get install python3-torch python3-torchvision python3-onnx`).

Writes OUTDIR/<name>.onnx and prints one line per model; a model whose
export fails is reported and skipped (exit status 0 unless every export failed).
"""
import argparse
import math
import os
import sys
import time

import torch
import torchvision

# The models of issue #18's table, in its order.
ISSUE_SET = ["squeezenet1_1", "googlenet", "resnet50", "resnext50_32x4d", "inception_v3", "mobilenet_v2", "bert"]


class EncoderLayer(torch.nn.Module):
    """One BERT layer: self-attention and a GELU feed-forward, post-LayerNorm."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.out = torch.nn.Linear(hidden, hidden)
        self.ln1 = torch.nn.LayerNorm(hidden)
        self.ff1 = torch.nn.Linear(hidden, ffn)
        self.ff2 = torch.nn.Linear(ffn, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(x).split(h, dim=-1)
        q = q.reshape(b, s, self.heads, d).transpose(1, 2)
        k = k.reshape(b, s, self.heads, d).transpose(1, 2)
        v = v.reshape(b, s, self.heads, d).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class Encoder(torch.nn.Module):
    def __init__(self, layers=4, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.layers = torch.nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def build(name):
    """(module, example input) for a model name."""
    if name == "bert":
        # BERT-base widths (hidden 768, 12 heads, FFN 3072), 4 layers, sequence 128.
        return Encoder(), torch.randn(1, 128, 768)
    kwargs = {}
    if name in ("googlenet", "inception_v3"):
        kwargs = {"aux_logits": False, "init_weights": False}
    m = torchvision.models.get_model(name, weights=None, **kwargs)
    size = 299 if name == "inception_v3" else 224
    if name.startswith("vit_h_14"):
        size = 224
    return m, torch.randn(1, 3, size, size)


def register_missing_symbolics(opset):
    """Operators PyTorch 1.13's exporter cannot write that torchvision uses.

    aten::zero: Swin V2 zeroes the key bias in place (qkv_bias[C:2C].zero_())
    before the attention; zeros of the input's shape are what it computes."""
    def zero(g, self):
        return g.op("ConstantOfShape", g.op("Shape", self))
    torch.onnx.register_custom_op_symbolic("aten::zero", zero, opset)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--set", choices=["issue", "torchvision", "all"], default="issue")
    ap.add_argument("--only", default="", help="comma-separated model names (overrides --set)")
    ap.add_argument("--force", action="store_true", help="export again even when OUTDIR/<name>.onnx exists")
    args = ap.parse_args()
    torch.manual_seed(0)
    register_missing_symbolics(args.opset)
    tv = torchvision.models.list_models(module=torchvision.models)
    names = ISSUE_SET if args.set == "issue" else tv if args.set == "torchvision" else ISSUE_SET + [n for n in tv if n not in ISSUE_SET]
    if args.only:
        names = args.only.split(",")
    os.makedirs(args.outdir, exist_ok=True)
    failed = 0
    for i, name in enumerate(names):
        path = os.path.join(args.outdir, name + ".onnx")
        if os.path.exists(path) and not args.force:
            print(f"[{i + 1}/{len(names)}] {name}: exists", flush=True)
            continue
        t0 = time.time()
        try:
            m, x = build(name)
            m.eval()
            tmp = path + ".tmp"
            # Without gradients, nn.MultiheadAttention (the ViTs) takes its
            # fused fast path, aten::_native_multi_head_attention, which
            # PyTorch 1.13's exporter cannot write; with them it runs the
            # plain operators.
            attention = any(isinstance(mod, torch.nn.MultiheadAttention) for mod in m.modules())
            with torch.set_grad_enabled(attention):
                torch.onnx.export(m, x, tmp, opset_version=args.opset, input_names=["input"], output_names=["output"],
                                  do_constant_folding=True)
            os.replace(tmp, path)
            print(f"[{i + 1}/{len(names)}] {name}: {os.path.getsize(path) / 1e6:.1f} MB in {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on to the next model
            failed += 1
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"[{i + 1}/{len(names)}] {name}: export failed: {msg}", flush=True)
    print(f"exported {len(names) - failed} of {len(names)} models to {args.outdir}")
    return 1 if failed == len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
