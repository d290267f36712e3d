// The f16 model of GELU (GeluArgs in registry.hpp): every step of GeluArgs' recipe rounded to fp16, the constants
// too; erf, tanh and exp through f32 (model_math.hpp's copies of erf_f32, tanh_f32 and exp_f32), rounded back once.
#include <cmath>

#include "halfmap/f16_model.hpp"
#include "halfmap/models.hpp"
#include "halfmap/registry.hpp"
#include "model_math.hpp"

namespace halfmap {

void f16_model_gelu(const GeluArgs& a, bool tanh, FmaKind fma) {
  using f16_model::add;
  using f16_model::mul;
  using f16_model::sub;
  const double pi = 3.14159265358979323846, c = 0.044715;
  const f16 one{0x3C00}, half{0x3800};
  // k0 = √(2/π), k1 = 1/√2, k2 = 1/√(2π), c and c3 = 3c, each rounded once to fp16
  const f16 k0 = to_f16(std::sqrt(2.0 / pi)), k1 = to_f16(1.0 / std::sqrt(2.0)), k2 = to_f16(1.0 / std::sqrt(2.0 * pi));
  const f16 cc = to_f16(c), c3 = to_f16(3.0 * c);
  const auto* x = static_cast<const f16*>(a.x);
  const auto* dy = static_cast<const f16*>(a.dy);
  auto canon = [](f16 v) { return is_nan(v) ? f16{0x7E00} : v; };
  for (std::size_t i = 0; i < a.n; ++i) {
    const f16 xv = x[i], h = mul(xv, half);
    f16 fa, d{};
    if (tanh) {
      const f16 x2 = mul(xv, xv);
      const f16 u = mul(k0, f16_model::fma(cc, mul(x2, xv), xv, fma));
      const f16 t = to_f16(models::tanh(to_f32(u)));
      fa = add(one, t);
      if (dy != nullptr) {
        d = f16_model::fma(h, mul(sub(one, mul(t, t)), mul(k0, f16_model::fma(c3, x2, one, fma))), mul(fa, half), fma);
      }
    } else {
      const f16 z = mul(xv, k1);
      fa = add(one, to_f16(models::erf(to_f32(z))));
      if (dy != nullptr) {
        const f16 p = to_f16(models::exp(to_f32(sub(f16{}, mul(z, z)))));
        d = f16_model::fma(mul(xv, k2), p, mul(fa, half), fma);
      }
    }
    if (a.y != nullptr) static_cast<f16*>(a.y)[i] = canon(mul(h, fa));
    if (dy != nullptr) static_cast<f16*>(a.dx)[i] = canon(mul(dy[i], d));
  }
}

}  // namespace halfmap
