// The f16 model of the reductions (registry.hpp's f16_model_reduce) and its one step.
#include <bit>
#include <vector>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"

namespace halfmap {

f16 f16_model_step(Op op, f16 acc, f16 x, f16 y, FmaKind fma) {
  switch (op) {
    case Op::sum:
      return f16_model::add(acc, x);
    case Op::sumsq:
      return f16_model::fma(x, x, acc, fma);
    case Op::dot:
      return f16_model::fma(x, y, acc, fma);
    case Op::maxabs:
      return f16{f16_model::abs_key(acc) > f16_model::abs_key(x) ? f16_model::abs_key(acc) : f16_model::abs_key(x)};
    default:
      return acc;  // not a reduction: never called with one
  }
}

f16 f16_model_reduce(Op op, const f16* x, const f16* y, std::size_t n, unsigned lanes, FmaKind fma) {
  if (op == Op::maxabs) {
    f16 m{};
    for (std::size_t i = 0; i < n; ++i) m = f16_model_step(op, m, x[i], f16{}, fma);
    return m;
  }
  if (lanes == 0 || (lanes & (lanes - 1)) != 0) lanes = 1;  // the fold needs a power of two
  std::vector<f16> acc(lanes);
  for (std::size_t i = 0; i < n; ++i) {
    f16& a = acc[i % lanes];
    a = f16_model_step(op, a, x[i], y != nullptr ? y[i] : f16{}, fma);
  }
  return f16_model::fold_lanes(acc);
}

}  // namespace halfmap
