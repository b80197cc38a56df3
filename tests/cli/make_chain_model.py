#!/usr/bin/env python3
"""Writes an ONNX model that is a chain of N simple operators (Relu, Tanh,
Sigmoid) on a [1, 16] input: the large-graph case of issue 20.

usage: make_chain_model.py N OUT.onnx   (needs the onnx Python package)
"""
import sys, onnx
from onnx import helper, TensorProto
n = int(sys.argv[1]); out = sys.argv[2]
ops = ["Relu", "Tanh", "Sigmoid"]
nodes = []
prev = "x"
for i in range(n):
    name = f"t{i}"
    nodes.append(helper.make_node(ops[i % 3], [prev], [name], name=f"n{i}"))
    prev = name
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 16])
onnx.save(helper.make_model(helper.make_graph(nodes, "chain", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]), out)
