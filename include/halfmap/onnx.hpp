// Reading a user's network from an ONNX file (what `torch.onnx.export`, tf2onnx and Keras 3's ONNX export write)
// into the layers halfmap runs: the input of `halfmap diagnose --model`.
//
// Parsing uses the protobuf classes of Debian's libonnx-dev (onnx::ModelProto). Everything after parsing is
// validated before it is used, as the .npy reader does: a malformed, truncated or hostile file (not protobuf, no
// graph, a tensor whose dims overflow or whose data is shorter or longer than its dims say, data kept in an
// external file, a value read before any node writes it (a cycle), two nodes writing one value, an unsupported
// op or attribute) is one sentence naming the file and the node or tensor, thrown as Error; nothing is allocated
// from a size the file declares without checking it against the bytes that hold it.
//
// What is read. One graph input of element type float, of rank 2 (rows × features; the row dimension may be
// symbolic) or rank 3 (sequences × tokens × features, the token count fixed: Network::seq), one graph output, and
// between them a chain of layers: each layer reads the previous layer's output and constants only (initializers
// and Constant nodes), a residual Add also an earlier layer's output, and an attention head its Q, K and V, all
// three projected from one value. Other branches are refused. The layers and the ONNX nodes they are read from:
//   dense      Gemm(x, W, C) with alpha = beta = 1, transA = 0, transB 0 or 1, C of shape (n) or (1, n) or absent;
//              MatMul(x, W), followed by Add(·, b) with a constant b of shape (n) or (1, n) when one follows;
//   relu, sigmoid, tanh   Relu, Sigmoid, Tanh;
//   gelu       Gelu (opset 20, approximate "none"; also domain com.microsoft), or the pattern torch 1.13
//              exports: x·(erf(x/√2) + 1)·0.5 (Div, Erf, Add, Mul, Mul);
//   gelu_tanh  Gelu with approximate "tanh", or the pattern 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//              (Mul/Pow, Add, Tanh, ...);
//   layernorm  LayerNormalization (opset 17; axis -1, epsilon as given, default 1e-5), or the pattern of earlier
//              opsets: ReduceMean, Sub, Pow, ReduceMean, Add ε, Sqrt, Div, Mul γ, Add β;
//   rmsnorm    the pattern x·γ / √(mean(x²) + ε) (Pow or Mul, ReduceMean, Add, Sqrt, Div or Reciprocal and Mul);
//   softmax    Softmax over the last axis;
//   attention  one head of scaled dot-product attention as exported from q = x·Wq + bq, k, v likewise: the
//              nodes MatMul(q, Transpose(k)), a Div by √d or Mul by 1/√d on q (prescale) or on the scores
//              (postscale), optionally an Add of a constant causal mask (0 on and below the diagonal, -inf above),
//              Softmax over the last axis, MatMul(·, v). It is read as two layers: a dense layer computing
//              [q | k | v] with the three projections side by side (the fused QKV projection of PyTorch's
//              MultiheadAttention; Layer::sources keeps the three initializers), then `attention` on its rows,
//              one sequence of Network::seq tokens at a time, with the kernel of the placement found;
//   add        a residual connection: Add of the previous layer's output and an earlier layer's output (or the
//              input), of the same width; the earlier operand is the skip (Layer::skip);
//   (nothing)  Identity, Flatten(axis 1) and Reshape to (−1 or 0, features): they keep rows × features.
// A pattern is recognised by its ops and then checked numerically: evaluated in float64 on probe rows, it must
// agree with the layer it is read as within 1e-5 of max(1, |y|) (its constants are float32 roundings of √2,
// √(2/π), ...); its constants (γ, β, ε) are taken from its nodes.
//
// Weights are kept as the file stores them (float32, float16 or bfloat16 initializers, converted exactly to
// float) with the stored type, so that a report can name the initializer a NaN comes from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace halfmap::onnx {

/// Bad input: one sentence for the user (no trailing newline), naming the file.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class LayerKind { dense, relu, sigmoid, tanh, gelu, gelu_tanh, layernorm, rmsnorm, softmax, add, attention };
std::string_view kind_name(LayerKind k);

/// The element type of an initializer as stored in the file.
enum class Stored { f32, f16, bf16 };
std::string_view stored_name(Stored s);

/// A constant of the network: its name in the file, its stored type and its values, exactly, as float.
struct Param {
  std::string name;
  Stored stored = Stored::f32;
  std::vector<float> values;
  bool empty() const { return values.empty(); }
};

struct Layer {
  LayerKind kind = LayerKind::dense;
  std::string name;  // the ONNX node's name (a pattern's: its nodes' common scope, "/encoder/mlp/act" for
                     // "/encoder/mlp/act/Div" .. "/encoder/mlp/act/Mul_1", else its first node's), else its output's
  std::string ops;   // the ONNX ops it was read from, e.g. "Gemm", "MatMul+Add", "Div+Erf+Add+Mul+Mul"
  std::size_t in = 0, out = 0;  // features in and out (equal except for dense)
  Param weight;                 // dense: in × out, row-major (x·W); layernorm and rmsnorm: γ (out)
  Param bias;                   // dense: out, or empty; layernorm: β (out), or empty
  double epsilon = 0;           // layernorm, rmsnorm
  /// add (a residual connection): the value added to the previous layer's output: 0 the network's input, k the
  /// output of layers[k - 1] (k <= this layer's index).
  std::size_t skip = 0;
  /// attention: its input is [q | k | v] (in = 3·out, out = d, one head); 1/√d on q before QKᵀ (prescale) or on
  /// the product (postscale); causal: token i attends to tokens 0 .. i only.
  bool prescale = false, causal = false;
  /// The initializers a weight and bias were assembled from, when more than one (attention's Q, K and V
  /// projections: Wq, bq, Wk, bk, Wv, bv, those present); empty when weight and bias are the file's own.
  std::vector<Param> sources;
};

struct Network {
  std::string input, output;  // the graph's input and output names
  std::size_t features = 0;   // the input's columns
  /// A rank-3 input's token count: rows come in sequences of `seq` tokens (attention attends within one); 0 for a
  /// rank-2 input, whose rows are independent.
  std::size_t seq = 0;
  std::vector<Layer> layers;  // in order; layers[i].in == (i ? layers[i-1].out : features)
  std::int64_t ir_version = 0, opset = 0;
  std::string producer;  // producer_name and producer_version, e.g. "pytorch 1.13.1"
};

/// The longest sequence a rank-3 input may declare (attention holds one sequence's len × len scores).
inline constexpr std::size_t kMaxSeq = 4096;

/// The most bytes of model `load` reads (protobuf's own limit is 2 GiB); also bounded by 3/4 of memory.
inline constexpr std::size_t kMaxModelBytes = (std::size_t{2} << 30) - 1;

/// Parses a whole ONNX file held in memory; `name` is used in error messages only. Throws Error.
Network parse(std::span<const unsigned char> bytes, const std::string& name = "model");
/// Reads and parses the file at `path`. Throws Error.
Network load(const std::string& path);

/// The ONNX ops halfmap reads, as one line for error messages and the help.
std::string_view supported_ops();

}  // namespace halfmap::onnx
