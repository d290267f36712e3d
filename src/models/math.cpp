// The f16 models' exp, erf and tanh (model_math.hpp), from the algorithms include/halfmap/math.hpp states. Every
// multiply-add is std::fma (one rounding), every other operation one f32 operation: the same IEEE operations in
// the same order as the definition, so the same bits on every machine.
#include "model_math.hpp"

#include <cmath>

namespace halfmap::models {

float exp(float x) {
  if (std::isnan(x)) return x + x;  // NaN in, NaN out (the input, quieted)
  const float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
  // n = x·log2(e) rounded to the nearest integer: adding 1.5·2^23 rounds to an integer (the sum lies in
  // [2^23, 2^24), where the f32 spacing is 1), subtracting it again is exact.
  const float big = 0x1.8p23f;
  const float n = std::fma(xc, float(1.4426950408889634), big) - big;
  // r = x - n·ln2, ln2 split as hi = f32(ln 2) and lo = f32(hi - ln 2).
  const double ln2 = 0.69314718055994531;
  const float hi = float(ln2), lo = float(double(hi) - ln2);
  float r = std::fma(n, -hi, xc);
  r = std::fma(n, lo, r);
  // e^r = Σ c_k r^k, c_0 = c_1 = 1 and Cephes expf's c_2 .. c_7, in Horner form.
  const float c[8] = {1.0f,
                      1.0f,
                      5.0000001201e-1f,
                      1.6666665459e-1f,
                      4.1665795894e-2f,
                      8.3334519073e-3f,
                      1.3981999507e-3f,
                      1.9875691500e-4f};
  float p = c[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, c[k]);
  // p·2^n rounded once: (p·2^n1)·2^n2 with n1 = ⌊n/2⌋, n2 = n - n1; both powers are normal f32 for n in
  // [-150, 128], and the first product is exact.
  const int ni = int(n), n1 = int(std::floor(n / 2.0f)), n2 = ni - n1;
  return (p * std::ldexp(1.0f, n1)) * std::ldexp(1.0f, n2);
}

f16 exp16(f16 h) { return to_f16(exp(to_f32(h))); }

float erf(float z) {
  if (std::isnan(z)) return z + z;
  const float a = std::fabs(z);
  const float t = 1.0f / std::fma(0.3275911f, a, 1.0f);
  float q = 1.061405429f;
  q = std::fma(q, t, -1.453152027f);
  q = std::fma(q, t, 1.421413741f);
  q = std::fma(q, t, -0.284496736f);
  q = std::fma(q, t, 0.254829592f);
  q = q * t;
  const float e = exp(0.0f - a * a);
  return std::copysign(std::fma(-q, e, 1.0f), z);
}

float tanh(float u) {
  if (std::isnan(u)) return u + u;
  return 1.0f - 2.0f / (exp(u + u) + 1.0f);
}

}  // namespace halfmap::models
