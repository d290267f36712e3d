// libFuzzer harness of the ONNX reader: any bytes must either give a Network or throw onnx::Error. Anything else
// escaping (another exception type, a crash, a sanitizer report) is a bug, and so is a Network that breaks its own
// contract (include/halfmap/onnx.hpp): layers chained by their feature counts, parameters of the sizes they say.
//
// Built with clang -fsanitize=fuzzer by tools/fuzz.sh onnx; built without libFuzzer as onnx_fuzz_replay (with
// replay_main.cpp), a ctest test that feeds it every file of tests/fuzz/corpus/onnx/ in every preset.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "halfmap/onnx.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "onnx_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace onnx = halfmap::onnx;
  onnx::Network net;
  try {
    net = onnx::parse(std::span<const unsigned char>(data, size), "fuzz.onnx");
  } catch (const onnx::Error&) {
    return 0;
  }
  if (net.layers.empty()) bug("a network without layers");
  std::size_t features = net.features;
  if (features == 0) bug("no features");
  for (const onnx::Layer& l : net.layers) {
    if (l.in != features || l.out == 0) bug("layers do not chain");
    switch (l.kind) {
      case onnx::LayerKind::dense:
        if (l.weight.values.size() != l.in * l.out) bug("dense weight of the wrong size");
        if (!l.bias.empty() && l.bias.values.size() != l.out) bug("dense bias of the wrong size");
        break;
      case onnx::LayerKind::layernorm:
      case onnx::LayerKind::rmsnorm:
        if (l.in != l.out || !(l.epsilon > 0)) bug("a norm that changes the width or has no epsilon");
        if (!l.weight.empty() && l.weight.values.size() != l.out) bug("gamma of the wrong size");
        if (!l.bias.empty() && l.bias.values.size() != l.out) bug("beta of the wrong size");
        break;
      case onnx::LayerKind::add: {
        // The skip is the input (0) or an earlier layer's output of the same width.
        const std::size_t index = std::size_t(&l - net.layers.data());
        if (l.skip > index) bug("a residual Add reads a later value");
        if ((l.skip == 0 ? net.features : net.layers[l.skip - 1].out) != l.out) bug("a residual Add of two widths");
        if (l.in != l.out || !l.weight.empty() || !l.bias.empty()) bug("a residual Add with parameters");
        break;
      }
      case onnx::LayerKind::attention: {
        // One head on [q | k | v] rows, after the dense layer that computes them, within sequences.
        const std::size_t index = std::size_t(&l - net.layers.data());
        if (net.seq == 0 || net.seq > onnx::kMaxSeq) bug("attention without sequences");
        if (l.in != 3 * l.out || !l.weight.empty() || !l.bias.empty()) bug("attention of the wrong widths");
        if (index == 0 || net.layers[index - 1].kind != onnx::LayerKind::dense || net.layers[index - 1].sources.empty())
          bug("attention not after its projection");
        break;
      }
      default:
        if (l.in != l.out || !l.weight.empty() || !l.bias.empty()) bug("an elementwise layer with parameters");
    }
    features = l.out;
  }
  return 0;
}
