#include "halfmap/registry.hpp"

#include <vector>

#include "kernels/common/tables.hpp"

namespace halfmap {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::sum: return "sum";
    case Op::sumsq: return "sumsq";
    case Op::maxabs: return "maxabs";
    case Op::dot: return "dot";
    case Op::dense_fwd: return "dense_fwd";
    case Op::dense_bwd: return "dense_bwd";
    case Op::mse: return "mse";
    case Op::softmax: return "softmax";
    case Op::softmax_naive: return "softmax_naive";
    case Op::xent: return "xent";
  }
  return "?";
}

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::f32: return "f32";
    case Mode::f16_f32acc: return "f16_f32acc";
    case Mode::f16: return "f16";
    case Mode::f16_model: return "f16_model";
    case Mode::bf16_f32acc: return "bf16_f32acc";
  }
  return "?";
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

std::span<const Kernel> kernels() {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> v;
    auto add = [&v](std::span<const Kernel> t) { v.insert(v.end(), t.begin(), t.end()); };
    add(tables::reduce_ref());
    add(tables::dense_ref());
    add(tables::nn_ref());
#if defined(HALFMAP_WITH_AVX2)
    add(tables::reduce_avx2());
    add(tables::dense_avx2());
    add(tables::nn_avx2());
#endif
#if defined(HALFMAP_WITH_AVX512)
    add(tables::reduce_avx512());
    add(tables::dense_avx512());
    add(tables::nn_avx512());
#endif
#if defined(HALFMAP_WITH_AVX512BF16)
    add(tables::reduce_avx512bf16());
    add(tables::dense_avx512bf16());
    add(tables::nn_avx512bf16());
#endif
#if defined(HALFMAP_WITH_AVX512FP16)
    add(tables::reduce_avx512fp16());
    add(tables::dense_avx512fp16());
    add(tables::nn_avx512fp16());
#endif
#if defined(HALFMAP_WITH_NEON)
    add(tables::reduce_neon());
    add(tables::dense_neon());
    add(tables::nn_neon());
#endif
#if defined(HALFMAP_WITH_NEONFP16)
    add(tables::reduce_neonfp16());
    add(tables::dense_neonfp16());
    add(tables::nn_neonfp16());
#endif
    return v;
  }();
  return all;
}

const Kernel* find_kernel(std::string_view name) {
  for (const Kernel& k : kernels()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace halfmap
