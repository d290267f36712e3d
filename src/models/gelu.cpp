// The f16 model of GELU (GeluArgs in registry.hpp): every step rounded to fp16 in the order the kernels take it,
// erf, tanh and exp through f32 (halfmap's erf_f32, tanh_f32, exp_f32, rounded back once).
#include "halfmap/f16_model.hpp"
#include "halfmap/math.hpp"
#include "halfmap/registry.hpp"
#include "kernels/common/gelu.hpp"

namespace halfmap {

void f16_model_gelu(const GeluArgs& a, bool tanh, FmaKind fma) {
  namespace c = detail::gelu_consts;
  using f16_model::add;
  using f16_model::mul;
  using f16_model::sub;
  const f16 one{0x3C00}, half{0x3800};
  const f16 k0 = to_f16(c::kK0), k1 = to_f16(c::kK1), k2 = to_f16(c::kK2), cc = to_f16(c::kC), c3 = to_f16(c::kC3);
  const auto* x = static_cast<const f16*>(a.x);
  const auto* dy = static_cast<const f16*>(a.dy);
  auto canon = [](f16 v) { return is_nan(v) ? f16{0x7E00} : v; };
  for (std::size_t i = 0; i < a.n; ++i) {
    const f16 xv = x[i], h = mul(xv, half);
    f16 fa, d{};
    if (tanh) {
      const f16 x2 = mul(xv, xv);
      const f16 u = mul(k0, f16_model::fma(cc, mul(x2, xv), xv, fma));
      const f16 t = to_f16(tanh_f32(to_f32(u)));
      fa = add(one, t);
      if (dy != nullptr) {
        d = f16_model::fma(h, mul(sub(one, mul(t, t)), mul(k0, f16_model::fma(c3, x2, one, fma))), mul(fa, half), fma);
      }
    } else {
      const f16 z = mul(xv, k1);
      fa = add(one, to_f16(erf_f32(to_f32(z))));
      if (dy != nullptr) {
        const f16 p = to_f16(exp_f32(to_f32(sub(f16{}, mul(z, z)))));
        d = f16_model::fma(mul(xv, k2), p, mul(fa, half), fma);
      }
    }
    if (a.y != nullptr) static_cast<f16*>(a.y)[i] = canon(mul(h, fa));
    if (dy != nullptr) static_cast<f16*>(a.dx)[i] = canon(mul(dy[i], d));
  }
}

}  // namespace halfmap
