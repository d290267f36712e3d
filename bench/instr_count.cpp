// halfmap_instr_count KERNEL...: calls each named memory-bound kernel once on 2^17 elements (the l2 level's
// shape: softmax and xent as rows of 1024 columns), each call inside the function `halfmap_instr_call`, so that
// `valgrind --tool=callgrind --toggle-collect=halfmap_instr_call` counts the instructions of the kernel calls and
// nothing else. tools/instr_count.sh runs it and divides by the elements: instructions per element, the evidence
// for a kernel that is bound by its arithmetic rather than by memory (perf counters are not available on every
// machine; valgrind's counts are exact and repeatable, whatever the load). Valgrind 3.19 has no AVX-512: run the
// avx2 and ref kernels under it (HALFMAP_ISA=avx2).
//
// The inputs are uniform in [-1, 1) like the benchmarks' (a fixed sequence; the kernels' instruction counts do
// not depend on the values, except maxabs's and softmax's NaN checks, which take the same branches for any
// finite input). Unknown kernel names, kernels of other ops or of an ISA this CPU lacks are an error (exit 2).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "halfmap/cpu.hpp"
#include "halfmap/half.hpp"
#include "halfmap/registry.hpp"

namespace {

constexpr std::size_t kElements = std::size_t{1} << 17;
constexpr std::size_t kCols = 1024;  // softmax and xent rows, as in bench_nn.cpp

/// 2·kElements values uniform in [-1, 1) (multiples of 2^-16), stored in `t`: x then y.
std::vector<unsigned char> inputs(halfmap::DType t) {
  const std::size_t esize = halfmap::dtype_size(t);
  std::vector<unsigned char> out(2 * kElements * esize);
  std::uint32_t state = 0x5EED;
  for (std::size_t i = 0; i < 2 * kElements; ++i) {
    state = state * 1664525u + 1013904223u;  // an LCG: any fixed sequence will do
    const float v = static_cast<float>(state >> 16) / 32768.0f - 1.0f;
    if (t == halfmap::DType::f32) {
      std::memcpy(&out[i * esize], &v, esize);
    } else if (t == halfmap::DType::f16) {
      const halfmap::f16 h = halfmap::to_f16(v);
      std::memcpy(&out[i * esize], &h, esize);
    } else {
      const halfmap::bf16 h = halfmap::to_bf16(v);
      std::memcpy(&out[i * esize], &h, esize);
    }
  }
  return out;
}

// noinline and extern "C": one stable symbol for --toggle-collect, whatever the optimiser does around it.
extern "C" __attribute__((noinline)) void halfmap_instr_call(const halfmap::Kernel& k, const void* x, const void* y,
                                                             void* out, const std::int32_t* labels) {
  using namespace halfmap;
  const std::size_t rows = kElements / kCols;
  volatile float sink = 0;
  switch (op_kind(k.op)) {
    case OpKind::reduce:
      sink = k.reduce(x, k.op == Op::dot ? y : nullptr, kElements);
      break;
    case OpKind::loss:
      sink = k.loss(LossArgs{kElements, x, y, 1.0f, nullptr});
      break;
    case OpKind::softmax:
      k.softmax(SoftmaxArgs{rows, kCols, x, out});
      break;
    case OpKind::xent:
      sink = k.xent(XentArgs{rows, kCols, x, labels, 1.0f, nullptr, out});
      break;
    default:
      break;
  }
  (void)sink;
}

/// The ops whose kernels call() runs (ops.hpp's kinds): the reductions, mse, the softmaxes and xent.
bool counted_op(halfmap::Op op) {
  using halfmap::OpKind;
  const OpKind kind = halfmap::op_kind(op);
  return kind == OpKind::reduce || kind == OpKind::loss || kind == OpKind::softmax || kind == OpKind::xent;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace halfmap;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: halfmap_instr_count KERNEL... (memory-bound kernels: reductions, mse, softmax, xent)\n");
    return 2;
  }
  std::vector<std::int32_t> labels(kElements / kCols);
  for (std::size_t r = 0; r < labels.size(); ++r) labels[r] = static_cast<std::int32_t>((r * 389) % kCols);
  std::vector<unsigned char> out(kElements * 4);
  for (int i = 1; i < argc; ++i) {
    const Kernel* k = find_kernel(argv[i]);
    if (k == nullptr || !counted_op(k->op)) {
      std::fprintf(stderr, "halfmap_instr_count: '%s' is not a reduction, mse, softmax or xent kernel.\n", argv[i]);
      return 2;
    }
    if (!isa_enabled(k->isa)) {
      std::fprintf(stderr, "halfmap_instr_count: %s cannot run here: ISA %s is not enabled.\n", argv[i],
                   std::string(isa_name(k->isa)).c_str());
      return 2;
    }
    const std::vector<unsigned char> in = inputs(k->storage);
    halfmap_instr_call(*k, in.data(), in.data() + kElements * dtype_size(k->storage), out.data(), labels.data());
    std::printf("%s %zu\n", argv[i], kElements);
  }
  return 0;
}
