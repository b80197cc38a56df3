#pragma once
// ONNX in and out.
//
//   auto m = tsopt::onnx::read_model("resnet.onnx", {.batch = 1});   // graph + interface
//   tsopt::graph g = m.graph;                                          // ... optimize ...
//   tsopt::onnx::save(g, "resnet.opt.onnx", tsopt::onnx::options_for(m));
//
// (Spell it tsopt::onnx: after `using namespace tsopt`, a bare `onnx::` is
// ambiguous with libonnx's ::onnx.)
// Link with `onnx_dep` (onnx_proto + onnx + protobuf; root meson.build).
// Accepted: ONNX files with default-domain opset 11..17 and float32 tensors.
//
// Operator mapping (import). Exact mappings only; everything else, and any
// node with an attribute the mapping does not know, becomes an opaque node
// that keeps its attributes and round-trips:
//   Conv (2-D)          conv2d; groups, strides, dilations; symmetric pads of
//                       dil*(k-1)/2 -> same, zero -> valid, other pads and
//                       auto_pad SAME_* -> pad + valid conv; bias -> ewadd of
//                       a [1,C,1,1] weight
//   Gemm                matmul (+ transpose / scaling folded into constant
//                       operands, smul otherwise) + ewadd of beta*C
//   MatMul (rank >= 2)  matmul;  Add, Mul -> ewadd, ewmul (broadcasting)
//   Sub                 ewadd of the negated constant, or of smul(y, -1)
//   Div                 ewmul by the reciprocal when the divisor is a constant
//                       of powers of two (exact); otherwise opaque
//   Relu Sigmoid Tanh   relu sigmoid tanh;  Identity, Dropout (inference) -> alias
//   MaxPool             maxpool with zero or `same` pads (no dilation; ceil_mode
//                       only where it does not change the extent)
//   AveragePool         avgpool: zero pads; or count_include_pad=1 with same
//                       pads, or other pads through pad + valid avgpool
//   GlobalAverage/MaxPool  full-window avgpool / maxpool
//   BatchNormalization  batchnorm with mean, var, epsilon folded (constants)
//   Concat Split        concat; n-way split -> chain of two-way splits
//   Transpose Reshape Flatten Softmax   transpose reshape reshape softmax
//                       (opset < 13 Softmax on a middle axis: reshape around it)
//   Pad                 pad (constant mode, zero value, H/W axes of NCHW)
//   Constant, initializers  weights (float) or shape constants (int)
//   Shape, and Gather Unsqueeze Squeeze Concat Slice Cast Reshape Identity
//   Neg Abs Add Sub Mul Div over int constants: evaluated at import (int64
//   shape arithmetic; tsopt shapes are static), so Reshape/Expand targets an
//   exporter computes from a tensor's shape are constants
// Validation (rejected with a named error, never repaired): input and output
// counts outside the operator's ONNX schema, an input that is undefined or
// the node's own output, a graph input listed twice.
// Opaque nodes: tsopt::onnx::install_reference_ops() registers reference
// implementations (Div, general 2-D pooling, Clip, Erf, Gelu, HardSwish,
// HardSigmoid, LayerNormalization, the Reduce* family, Pow, Sqrt, Sub, Where,
// Expand, Cast, ... see reference_ops.hpp) for a backend's opaque_impls.
#include "tsopt/io/onnx/export.hpp"
#include "tsopt/io/onnx/import.hpp"
#include "tsopt/io/onnx/proto.hpp"
#include "tsopt/io/onnx/reference_ops.hpp"
