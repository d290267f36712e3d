// The check every peer passes on this CPU before the sweep maps it (registry.cpp) or halfmap_bench times it
// (bench/bench_peers.cpp): the kernel on small deterministic inputs in [-1, 1], stored in its type, against float64
// on the stored values. The error is
// max|y - y_f64| / max(1, max|y_f64|) over the outputs (a NaN output: infinite), and for a gradient the same over
// the gradient with its own scale:
//   dense_fwd   8×64 · 64×16 with bias;
//   dense_bwd   the same shapes: dX = dY·Wᵀ, dW = Xᵀ·dY, db = Σ_rows dY, the three errors' largest;
//   reductions  1000 elements (maxabs: exact, tolerance 0);
//   mse         1000 predictions and targets: the loss, and dp = 2(p - y)/n at loss scale 1 unless forward only;
//   softmax     8 rows × 16 columns of 4·[-1, 1] (stable softmax);
//   xent        8 rows × 16 columns of 4·[-1, 1], labels r·5 mod 16: the mean loss, and dlogits = (p - onehot)/rows
//               at loss scale 1 unless forward only.
//   layernorm,  8 rows × 16 columns of 1 + 4·[-1, 1], γ in 1 + 0.5·[-1, 1], β in [-1, 1], ε = 1e-5: y, and from
//   rmsnorm     dy in [-1, 1] dx, dγ and dβ (each gradient's error with its own scale), the largest.
//   attention   one head of len 8 and d 16, Q and K in 2·[-1, 1], V and dO in [-1, 1], not causal, the exact 1/√d:
//               O, and dQ, dK, dV unless forward only (each with its own scale), the largest.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "halfmap/storage.hpp"
#include "peers/peers.hpp"

namespace halfmap::peers {
namespace {

/// Deterministic values in [-scale, scale): a 32-bit LCG, the same on every run and CPU.
TypedBuffer values(DType t, std::size_t n, std::uint32_t seed, std::vector<double>& v, double scale = 1) {
  TypedBuffer b(t, n);
  v.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = b.set(i, scale * (double(seed >> 8) / double(1u << 23) - 1.0));
  }
  return b;
}

/// max|got - ref| / max(1, max|ref|) over a buffer; infinite if any output is NaN.
double error(const TypedBuffer& got, const std::vector<double>& ref) {
  double err = 0, scale = 1;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = got.get(i);
    if (std::isnan(g)) return INFINITY;
    err = std::fmax(err, std::fabs(g - ref[i]));
    scale = std::fmax(scale, std::fabs(ref[i]));
  }
  return err / scale;
}

/// The same for a buffer whose values are all small (gradients): relative to max|ref| itself.
double grad_error(const TypedBuffer& got, const std::vector<double>& ref) {
  double mx = 0;
  for (double r : ref) mx = std::fmax(mx, std::fabs(r));
  std::vector<double> scaled(ref.size());
  TypedBuffer g(DType::f32, ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scaled[i] = ref[i] / mx;
    g.set(i, got.get(i) / mx);
  }
  return error(g, scaled);
}

double scalar_error(double got, double ref) {
  return std::isnan(got) ? INFINITY : std::fabs(got - ref) / std::fmax(1.0, std::fabs(ref));
}

constexpr std::size_t kM = 8, kK = 64, kN = 16;

double dense_error(const Kernel& k) {
  std::vector<double> x, w, b;
  const TypedBuffer xb = values(k.storage, kM * kK, 1, x), wb = values(k.storage, kK * kN, 2, w),
                    bb = values(k.storage, kN, 3, b);
  TypedBuffer yb(k.storage, kM * kN);
  k.dense(DenseArgs{kM, kN, kK, xb.data(), wb.data(), bb.data(), yb.data(), Act::identity});
  std::vector<double> ref(kM * kN);
  for (std::size_t i = 0; i < kM; ++i) {
    for (std::size_t j = 0; j < kN; ++j) {
      double r = b[j];
      for (std::size_t p = 0; p < kK; ++p) r += x[i * kK + p] * w[p * kN + j];
      ref[i * kN + j] = r;
    }
  }
  return error(yb, ref);
}

double dense_bwd_error(const Kernel& k) {
  std::vector<double> x, w, dy;
  const TypedBuffer xb = values(k.storage, kM * kK, 1, x), wb = values(k.storage, kK * kN, 2, w),
                    dyb = values(k.storage, kM * kN, 3, dy);
  TypedBuffer dx(k.storage, kM * kK), dw(k.storage, kK * kN), db(k.storage, kN);
  k.dense_bwd(DenseBwdArgs{kM, kN, kK, xb.data(), wb.data(), dyb.data(), dx.data(), dw.data(), db.data()});
  std::vector<double> rx(kM * kK, 0.0), rw(kK * kN, 0.0), rb(kN, 0.0);
  for (std::size_t i = 0; i < kM; ++i) {
    for (std::size_t p = 0; p < kK; ++p) {
      for (std::size_t j = 0; j < kN; ++j) {
        rx[i * kK + p] += dy[i * kN + j] * w[p * kN + j];
        rw[p * kN + j] += x[i * kK + p] * dy[i * kN + j];
      }
    }
    for (std::size_t j = 0; j < kN; ++j) rb[j] += dy[i * kN + j];
  }
  return std::max({error(dx, rx), error(dw, rw), error(db, rb)});
}

constexpr std::size_t kElements = 1000;  // of a reduction and of mse

double reduce_error(const Kernel& k) {
  const std::size_t n = kElements;
  std::vector<double> x, y;
  const TypedBuffer xb = values(k.storage, n, 4, x), yb = values(k.storage, n, 5, y);
  double ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    switch (k.op) {
      case Op::sum:
        ref += x[i];
        break;
      case Op::sumsq:
        ref += x[i] * x[i];
        break;
      case Op::dot:
        ref += x[i] * y[i];
        break;
      default:
        ref = std::fmax(ref, std::fabs(x[i]));
        break;
    }
  }
  return scalar_error(k.reduce(xb.data(), k.op == Op::dot ? yb.data() : nullptr, n), ref);
}

double mse_error(const Kernel& k) {
  const std::size_t n = kElements;
  std::vector<double> p, y;
  const TypedBuffer pb = values(k.storage, n, 6, p), yb = values(k.storage, n, 7, y);
  TypedBuffer dp(k.storage, n);
  double ref = 0;
  std::vector<double> rdp(n);
  for (std::size_t i = 0; i < n; ++i) {
    ref += (p[i] - y[i]) * (p[i] - y[i]);
    rdp[i] = 2 * (p[i] - y[i]) / double(n);
  }
  const float loss = k.loss(LossArgs{n, pb.data(), yb.data(), 1.0f, k.forward_only ? nullptr : dp.data()});
  const double err = scalar_error(loss, ref / double(n));
  return k.forward_only ? err : std::max(err, grad_error(dp, rdp));
}

/// The stable softmax of rows × cols values in f64.
std::vector<double> softmax_ref(const std::vector<double>& x, std::size_t rows, std::size_t cols) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * cols];
    const double mx = *std::max_element(xr, xr + cols);
    double s = 0;
    for (std::size_t j = 0; j < cols; ++j) s += y[r * cols + j] = std::exp(xr[j] - mx);
    for (std::size_t j = 0; j < cols; ++j) y[r * cols + j] /= s;
  }
  return y;
}

constexpr std::size_t kRows = 8, kCols = 16;

double softmax_error(const Kernel& k) {
  std::vector<double> x;
  const TypedBuffer xb = values(k.storage, kRows * kCols, 8, x, 4);
  TypedBuffer yb(k.storage, kRows * kCols);
  k.softmax(SoftmaxArgs{kRows, kCols, xb.data(), yb.data()});
  return error(yb, softmax_ref(x, kRows, kCols));
}

double xent_error(const Kernel& k) {
  std::vector<double> x;
  const TypedBuffer xb = values(k.storage, kRows * kCols, 9, x, 4);
  std::vector<std::int32_t> labels(kRows);
  for (std::size_t r = 0; r < kRows; ++r) labels[r] = std::int32_t(r * 5 % kCols);
  TypedBuffer dl(k.storage, kRows * kCols);
  const float loss =
      k.xent(XentArgs{kRows, kCols, xb.data(), labels.data(), 1.0f, nullptr, k.forward_only ? nullptr : dl.data()});
  std::vector<double> p = softmax_ref(x, kRows, kCols);
  double ref = 0;
  for (std::size_t r = 0; r < kRows; ++r) ref -= std::log(p[r * kCols + std::size_t(labels[r])]);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t j = 0; j < kCols; ++j) {
      p[r * kCols + j] = (p[r * kCols + j] - (std::size_t(labels[r]) == j ? 1.0 : 0.0)) / double(kRows);
    }
  }
  const double err = scalar_error(loss, ref / double(kRows));
  return k.forward_only ? err : std::max(err, grad_error(dl, p));
}

double norm_error(const Kernel& k) {
  const bool rms = k.op == Op::rmsnorm;
  std::vector<double> x, g, b, dy;
  TypedBuffer xb = values(k.storage, kRows * kCols, 10, x, 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = xb.set(i, 1.0 + x[i]);
  TypedBuffer gb = values(k.storage, kCols, 11, g, 0.5);
  for (std::size_t j = 0; j < kCols; ++j) g[j] = gb.set(j, 1.0 + g[j]);
  const TypedBuffer bb = values(k.storage, kCols, 12, b), dyb = values(k.storage, kRows * kCols, 13, dy);
  TypedBuffer y(k.storage, kRows * kCols), dx(k.storage, kRows * kCols), dg(k.storage, kCols), db(k.storage, kCols);
  constexpr float kEps = 1e-5f;
  k.norm(NormArgs{kRows, kCols, xb.data(), gb.data(), bb.data(), kEps, y.data(), nullptr, nullptr, nullptr, nullptr,
                  nullptr, nullptr});
  k.norm(NormArgs{kRows, kCols, xb.data(), gb.data(), bb.data(), kEps, nullptr, nullptr, nullptr, dyb.data(), dx.data(),
                  dg.data(), rms ? nullptr : db.data()});
  std::vector<double> ry(kRows * kCols), rdx(kRows * kCols), rdg(kCols, 0), rdb(kCols, 0), xh(kCols);
  for (std::size_t i = 0; i < kRows; ++i) {
    double mu = 0, v = 0, a = 0, c = 0;
    for (std::size_t j = 0; j < kCols && !rms; ++j) mu += x[i * kCols + j] / double(kCols);
    for (std::size_t j = 0; j < kCols; ++j) v += (x[i * kCols + j] - mu) * (x[i * kCols + j] - mu) / double(kCols);
    const double r = 1 / std::sqrt(v + double(kEps));
    for (std::size_t j = 0; j < kCols; ++j) {
      xh[j] = (x[i * kCols + j] - mu) * r;
      ry[i * kCols + j] = xh[j] * g[j] + (rms ? 0.0 : b[j]);
      const double gv = dy[i * kCols + j] * g[j];
      a += rms ? 0.0 : gv / double(kCols);
      c += gv * xh[j] / double(kCols);
      rdg[j] += dy[i * kCols + j] * xh[j];
      rdb[j] += dy[i * kCols + j];
    }
    for (std::size_t j = 0; j < kCols; ++j) rdx[i * kCols + j] = r * (dy[i * kCols + j] * g[j] - a - xh[j] * c);
  }
  double err = std::max({error(y, ry), grad_error(dx, rdx), grad_error(dg, rdg)});
  return rms ? err : std::max(err, grad_error(db, rdb));
}

constexpr std::size_t kLen = 8, kDim = 16;  // of the attention head

double attention_error(const Kernel& k) {
  constexpr std::size_t L = kLen, D = kDim;
  std::vector<double> q, kk, v, dout;
  const TypedBuffer qb = values(k.storage, L * D, 20, q, 2), kb = values(k.storage, L * D, 21, kk, 2);
  const TypedBuffer vb = values(k.storage, L * D, 22, v), db = values(k.storage, L * D, 23, dout);
  TypedBuffer o(k.storage, L * D), dq(k.storage, L * D), dk(k.storage, L * D), dv(k.storage, L * D);
  k.attention(AttentionArgs{L, D, false, qb.data(), kb.data(), vb.data(), o.data(), nullptr, nullptr, nullptr, nullptr,
                            nullptr, 1});
  if (!k.forward_only) {
    k.attention(AttentionArgs{L, D, false, qb.data(), kb.data(), vb.data(), nullptr, nullptr, db.data(), dq.data(),
                              dk.data(), dv.data(), 1});
  }
  const double c = 1 / std::sqrt(double(D));
  std::vector<double> p(L * L), ro(L * D, 0), rdq(L * D, 0), rdk(L * D, 0), rdv(L * D, 0), dp(L);
  for (std::size_t i = 0; i < L; ++i) {
    double m = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < L; ++j) {
      double s = 0;
      for (std::size_t t = 0; t < D; ++t) s += q[i * D + t] * kk[j * D + t];
      p[i * L + j] = s * c;
      m = std::max(m, s * c);
    }
    for (std::size_t j = 0; j < L; ++j) sum += p[i * L + j] = std::exp(p[i * L + j] - m);
    double delta = 0;
    for (std::size_t j = 0; j < L; ++j) {
      p[i * L + j] /= sum;
      dp[j] = 0;
      for (std::size_t t = 0; t < D; ++t) {
        ro[i * D + t] += p[i * L + j] * v[j * D + t];
        rdv[j * D + t] += p[i * L + j] * dout[i * D + t];
        dp[j] += dout[i * D + t] * v[j * D + t];
      }
      delta += p[i * L + j] * dp[j];
    }
    for (std::size_t j = 0; j < L; ++j) {
      const double ds = p[i * L + j] * (dp[j] - delta) * c;
      for (std::size_t t = 0; t < D; ++t) {
        rdq[i * D + t] += ds * kk[j * D + t];
        rdk[j * D + t] += ds * q[i * D + t];
      }
    }
  }
  const double err = error(o, ro);
  return k.forward_only ? err : std::max({err, grad_error(dq, rdq), grad_error(dk, rdk), grad_error(dv, rdv)});
}

}  // namespace

std::string check_inputs(Op op) {
  switch (op) {
    case Op::dense_fwd:
      return fmt::format("{}×{} · {}×{} with bias", kM, kK, kK, kN);
    case Op::dense_bwd:
      return fmt::format("{}×{} · {}×{}: dX, dW, db", kM, kK, kK, kN);
    case Op::mse:
      return fmt::format("{} predictions and targets", kElements);
    case Op::softmax:
    case Op::softmax_naive:
    case Op::xent:
      return fmt::format("{} rows × {} columns of 4·[-1, 1]", kRows, kCols);
    case Op::layernorm:
    case Op::rmsnorm:
      return fmt::format("{} rows × {} columns of 1 + 4·[-1, 1], y and its gradients", kRows, kCols);
    case Op::attention_prescale:
    case Op::attention_postscale:
      return fmt::format("one head of len {} and d {}", kLen, kDim);
    default:
      return fmt::format("{} elements", kElements);
  }
}

double check_error(const Kernel& k) {
  switch (k.op) {
    case Op::dense_fwd:
      return dense_error(k);
    case Op::dense_bwd:
      return dense_bwd_error(k);
    case Op::mse:
      return mse_error(k);
    case Op::softmax:
    case Op::softmax_naive:
      return softmax_error(k);
    case Op::xent:
      return xent_error(k);
    case Op::layernorm:
    case Op::rmsnorm:
      return norm_error(k);
    case Op::attention_prescale:
    case Op::attention_postscale:
      return attention_error(k);
    default:
      return reduce_error(k);
  }
}

}  // namespace halfmap::peers
