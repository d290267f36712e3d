// The ONNX reader (include/halfmap/onnx.hpp) on files it did not write: networks PyTorch 1.13 exported and models
// onnx.helper built (tests/fuzz/make_onnx_corpus.py). A network is checked layer by layer and then as a whole: a
// float64 forward of what halfmap read must give PyTorch's float32 output on the same rows. Every bad file must be
// refused with one sentence that names the file and what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "halfmap/half.hpp"
#include "halfmap/npy.hpp"
#include "halfmap/onnx.hpp"
#include "net_reference.hpp"

namespace halfmap::onnx {
namespace {

const std::string kCorpus = HALFMAP_ONNX_CORPUS;
const std::string kData = HALFMAP_ONNX_DATA;

std::vector<LayerKind> kinds(const Network& n) {
  std::vector<LayerKind> k;
  for (const Layer& l : n.layers) k.push_back(l.kind);
  return k;
}

/// The network's output in float64 (tests/net_reference.hpp).
std::vector<double> forward(const Network& net, const std::vector<double>& x, std::size_t rows) {
  return testing::forward64(net, x, rows).back();
}

class TorchMlp : public ::testing::TestWithParam<int> {};

TEST_P(TorchMlp, ReadsEveryLayerAndComputesWhatPyTorchComputes) {
  const std::string file = kCorpus + "/good_torch_mlp_opset" + std::to_string(GetParam()) + ".onnx";
  const Network net = load(file);
  EXPECT_EQ(net.input, "x");
  EXPECT_EQ(net.output, "y");
  EXPECT_EQ(net.features, 8u);
  EXPECT_EQ(net.opset, GetParam());
  EXPECT_EQ(net.producer, "pytorch 1.13.0");  // what torch 1.13.1 writes
  using K = LayerKind;
  ASSERT_EQ(kinds(net), (std::vector<K>{K::dense, K::layernorm, K::gelu, K::dense, K::gelu_tanh, K::relu, K::dense,
                                        K::rmsnorm, K::sigmoid, K::dense, K::tanh, K::softmax}));
  EXPECT_EQ(net.layers[0].name, "/0/Gemm");
  EXPECT_EQ(net.layers[0].ops, "Gemm");
  EXPECT_EQ(net.layers[0].weight.name, "0.weight");
  EXPECT_EQ(net.layers[0].bias.name, "0.bias");
  EXPECT_EQ(net.layers[0].in, 8u);
  EXPECT_EQ(net.layers[0].out, 16u);
  EXPECT_EQ(net.layers[1].ops,
            GetParam() == 17 ? "LayerNormalization" : "ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add");
  EXPECT_EQ(net.layers[1].weight.name, "1.weight");
  EXPECT_EQ(net.layers[1].bias.name, "1.bias");
  EXPECT_FLOAT_EQ(float(net.layers[1].epsilon), 1e-5f);
  EXPECT_EQ(net.layers[2].ops, "Div+Erf+Add+Mul+Mul");
  EXPECT_FLOAT_EQ(float(net.layers[7].epsilon), 1e-6f);
  EXPECT_EQ(net.layers[7].weight.name, "7.weight");
  EXPECT_TRUE(net.layers[7].bias.empty());
  EXPECT_EQ(net.layers[9].out, 4u);

  const npy::Array x = npy::load(kData + "/torch_mlp_x.npy"), y = npy::load(kData + "/torch_mlp_y.npy");
  ASSERT_EQ(x.cols, 8u);
  const std::vector<double> got = forward(net, x.values, x.rows);
  ASSERT_EQ(got.size(), y.values.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y.values[i], 1e-5) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Opsets, TorchMlp, ::testing::Values(13, 17));

class TorchResidual : public ::testing::TestWithParam<int> {};

TEST_P(TorchResidual, ReadsThePreNormBlocksAndTheirSkips) {
  const Network net = load(kCorpus + "/good_torch_residual_opset" + std::to_string(GetParam()) + ".onnx");
  using K = LayerKind;
  ASSERT_EQ(kinds(net), (std::vector<K>{K::dense, K::layernorm, K::dense, K::gelu, K::dense, K::add, K::layernorm,
                                        K::dense, K::gelu, K::dense, K::add, K::dense}));
  // h = inp(x) is value 1 (layers[0]'s output); the first block adds it back, the second adds the first's sum
  // (value 6, layers[5]'s output).
  EXPECT_EQ(net.layers[5].skip, 1u);
  EXPECT_EQ(net.layers[10].skip, 6u);
  EXPECT_EQ(net.layers[5].ops, "Add");
  const npy::Array x = npy::load(kData + "/torch_mlp_x.npy"), y = npy::load(kData + "/torch_residual_y.npy");
  const std::vector<double> got = forward(net, x.values, x.rows);
  ASSERT_EQ(got.size(), y.values.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], y.values[i], 1e-5) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Opsets, TorchResidual, ::testing::Values(13, 17));

/// The attention networks' input: 6 sequences of 8 tokens, one token per row.
std::vector<double> expect_torch_output(const Network& net, const std::string& y_file) {
  const npy::Array x = npy::load(kData + "/torch_attention_x.npy"), y = npy::load(kData + "/" + y_file);
  EXPECT_EQ(x.rows, 48u);
  const std::vector<double> got = forward(net, x.values, x.rows);
  EXPECT_EQ(got.size(), y.values.size());
  for (std::size_t i = 0; i < got.size() && i < y.values.size(); ++i)
    EXPECT_NEAR(got[i], y.values[i], 1e-5) << "element " << i;
  return got;
}

class TorchAttention : public ::testing::TestWithParam<int> {};

TEST_P(TorchAttention, ReadsOneHeadAsItsFusedProjectionAndTheHead) {
  const Network net = load(kCorpus + "/good_torch_attention_opset" + std::to_string(GetParam()) + ".onnx");
  using K = LayerKind;
  ASSERT_EQ(kinds(net), (std::vector<K>{K::dense, K::attention, K::dense}));
  EXPECT_EQ(net.seq, 8u);
  EXPECT_EQ(net.features, 8u);
  const Layer& qkv = net.layers[0];
  EXPECT_EQ(qkv.name, "/attn/qkv");
  EXPECT_EQ(qkv.in, 8u);
  EXPECT_EQ(qkv.out, 48u);
  ASSERT_EQ(qkv.sources.size(), 6u);  // Wq, bq, Wk, bk, Wv, bv
  EXPECT_EQ(qkv.sources[1].name, "attn.q.bias");
  EXPECT_EQ(qkv.sources[3].name, "attn.k.bias");
  EXPECT_EQ(qkv.sources[5].name, "attn.v.bias");
  // Wk's column j is column 16 + j of the fused weight (torch stores Linear's weight transposed for MatMul).
  EXPECT_EQ(qkv.weight.values[1 * 48 + 16 + 3], qkv.sources[2].values[1 * 16 + 3]);
  const Layer& head = net.layers[1];
  EXPECT_EQ(head.name, "/attn");
  EXPECT_EQ(head.ops, "Transpose+MatMul+Div+Softmax+MatMul");
  EXPECT_EQ(head.in, 48u);
  EXPECT_EQ(head.out, 16u);
  EXPECT_FALSE(head.prescale);  // scores / √d after the product
  EXPECT_FALSE(head.causal);
  expect_torch_output(net, "torch_attention_y.npy");
}

TEST_P(TorchAttention, ReadsAPreNormCausalDecoderBlock) {
  const Network net = load(kCorpus + "/good_torch_decoder_opset" + std::to_string(GetParam()) + ".onnx");
  using K = LayerKind;
  ASSERT_EQ(kinds(net), (std::vector<K>{K::layernorm, K::dense, K::attention, K::dense, K::add, K::layernorm, K::dense,
                                        K::gelu, K::dense, K::add, K::dense}));
  EXPECT_TRUE(net.layers[2].prescale);  // q / √d before the product
  EXPECT_TRUE(net.layers[2].causal);
  EXPECT_EQ(net.layers[4].skip, 0u);  // x + out(attn(ln1(x))): the input
  EXPECT_EQ(net.layers[9].skip, 5u);  // h + mlp(h): the first sum, layers[4]'s output
  expect_torch_output(net, "torch_decoder_y.npy");
}

INSTANTIATE_TEST_SUITE_P(Opsets, TorchAttention, ::testing::Values(13, 17));

TEST(OnnxRead, KeepsTheStoredTypeOfEachWeightAndReadsItExactly) {
  const Network half = load(kCorpus + "/good_matmul_add_f16_bf16.onnx");
  const Network full = load(kCorpus + "/good_gemm_reshape.onnx");
  using K = LayerKind;
  ASSERT_EQ(kinds(half), (std::vector<K>{K::dense, K::gelu_tanh, K::softmax}));
  ASSERT_EQ(kinds(full), (std::vector<K>{K::dense}));  // Identity, Flatten and Reshape keep the shape
  EXPECT_EQ(half.layers[0].ops, "MatMul+Add");
  EXPECT_EQ(half.layers[0].name, "fc");
  EXPECT_EQ(half.layers[0].weight.stored, Stored::f16);
  EXPECT_EQ(half.layers[0].bias.stored, Stored::bf16);
  EXPECT_EQ(full.layers[0].weight.stored, Stored::f32);
  ASSERT_EQ(half.layers[0].weight.values.size(), 12u);
  // The same weights, stored as float16 and bfloat16 by NumPy and as float32: the reader's values are exactly
  // the roundings of the float32 ones (so neither is transposed or misread).
  for (std::size_t i = 0; i < 12; ++i) {
    const float w = full.layers[0].weight.values[i];
    const float h = half.layers[0].weight.values[i];
    EXPECT_LE(std::abs(h - w), std::abs(w) * 0x1p-11f) << i;
    EXPECT_EQ(to_f32(to_f16(w)), h) << i;
  }
  for (std::size_t j = 0; j < 3; ++j) {
    const float b = full.layers[0].bias.values[j], h = half.layers[0].bias.values[j];
    EXPECT_LE(std::abs(h - b), std::abs(b) * 0x1p-7f) << j;
  }
}

struct Bad {
  const char* file;
  const char* says;  // a fragment of the one sentence
};

class OnnxRefuses : public ::testing::TestWithParam<Bad> {};

TEST_P(OnnxRefuses, WithOneSentenceNamingTheFile) {
  const std::string path = kCorpus + "/" + GetParam().file;
  try {
    (void)load(path);
    FAIL() << path << " was read";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(GetParam().says), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.back(), '.') << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, OnnxRefuses,
    ::testing::Values(
        Bad{"bad_not_protobuf.onnx", "does not parse as an ONNX ModelProto"}, Bad{"bad_empty.onnx", "does not parse"},
        Bad{"bad_unsupported_op.onnx", "node 'conv1' (Conv) is not supported; halfmap reads Gemm"},
        Bad{"bad_cycle.onnx", "node 'a' (Relu) reads 'z', which no initializer, input or earlier node writes"},
        Bad{"bad_raw_data_short.onnx", "initializer 'W' declares 12 elements (48 bytes) but holds 44 bytes"},
        Bad{"bad_dims_overflow.onnx", "initializer 'W' declares more than 2^40 elements"},
        Bad{"bad_external_data.onnx", "initializer 'W' keeps its data in an external file ('weights.bin')"},
        Bad{"bad_input_rank4.onnx", "input 'x' has rank 4"},
        Bad{"bad_seq_symbolic.onnx", "input 'x' has a symbolic token count"},
        Bad{"bad_attention_mask.onnx", "its mask 'mask' is not the causal one"},
        Bad{"bad_attention_unscaled.onnx", "it has no scale 1/√d"},
        Bad{"bad_attention_rank2.onnx", "the input is rows × features (rank 2)"},
        Bad{"bad_input_double.onnx", "input 'x' is not a float32 tensor"},
        Bad{"bad_weight_shape.onnx", "its weight 'W' has 5 inputs, but the layer before it gives 4 features"},
        Bad{"bad_gemm_alpha.onnx", "node 'gemm' (Gemm): transA, alpha or beta is not the default"},
        Bad{"bad_double_weight.onnx", "initializer 'W' has element type DOUBLE (11)"},
        Bad{"bad_f16_int32_data.onnx", "holds 70000 in its int32_data"},
        Bad{"bad_written_twice.onnx", "node 'again' (Relu) writes 'y', which is already defined"},
        Bad{"bad_fake_gelu.onnx", "form no layer halfmap knows"}, Bad{"bad_branch.onnx", "branch from"}),
    [](const auto& info) {
      std::string n = info.param.file;
      n = n.substr(4, n.size() - 9);  // bad_<name>.onnx
      return n;
    });

TEST(OnnxLoad, RefusesAMissingFileAndAFolder) {
  EXPECT_THROW((void)load(kCorpus + "/no_such_model.onnx"), Error);
  EXPECT_THROW((void)load(kCorpus), Error);
}

}  // namespace
}  // namespace halfmap::onnx
