// The seed model's paths, weights and runner (src/diagnose/seed_model.hpp).
#include "diagnose/seed_model.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "halfmap/detmath.hpp"

namespace halfmap::diagnose {

namespace {

const Kernel* find(Op op, Mode mode, Isa isa) {
  for (const Kernel& k : kernels()) {
    if (k.op == op && k.mode == mode && k.isa == isa && kernel_enabled(k)) return &k;
  }
  return nullptr;
}

std::optional<SeedPath> make_seed_path(Mode mode, Isa isa) {
  SeedPath p;
  p.fwd = find(Op::dense_fwd, mode, isa);
  p.bwd = find(Op::dense_bwd, mode, isa);
  p.loss = find(Op::mse, mode, isa);
  if (p.fwd == nullptr || p.bwd == nullptr || p.loss == nullptr) return std::nullopt;
  p.info.name = fmt::format("{}/{}", mode_name(mode), isa_name(isa));
  p.info.mode = mode;
  p.info.isa = isa;
  p.info.storage = p.fwd->storage;
  return p;
}

}  // namespace

SeedPath baseline_path() {
  std::optional<SeedPath> best;
  for (Isa isa : kAllIsas) {
    if (auto p = make_seed_path(Mode::f32, isa)) best = p;  // kAllIsas lists each chain from the lowest ISA up
  }
  if (!best) throw std::runtime_error("no enabled f32 dense_fwd, dense_bwd and mse kernels");
  return *best;
}

std::vector<SeedPath> low_precision_paths(bool all_paths, const std::string& path_first) {
  std::vector<SeedPath> out;
  std::optional<SeedPath> first;
  for (Mode mode : {Mode::f16_f32acc, Mode::f16, Mode::bf16_f32acc}) {
    std::vector<SeedPath> mode_paths;
    for (Isa isa : kAllIsas) {
      if (auto p = make_seed_path(mode, isa)) mode_paths.push_back(*p);
    }
    if (mode_paths.empty()) continue;
    // kAllIsas lists each chain from the lowest ISA up: the last enabled one is the mode's best, and the one
    // Keras mixed_float16's f32-accumulating GEMM corresponds to for f16_f32acc.
    if (mode == Mode::f16_f32acc) mode_paths.back().info.keras_like = true;
    for (const SeedPath& p : mode_paths) {
      if (p.info.name == path_first) first = p;
    }
    if (all_paths) {
      out.insert(out.end(), mode_paths.begin(), mode_paths.end());
    } else {
      out.push_back(mode_paths.back());
    }
  }
  if (!path_first.empty()) {
    if (!first) {
      std::string names;
      for (Mode mode : {Mode::f16_f32acc, Mode::f16, Mode::bf16_f32acc}) {
        for (Isa isa : kAllIsas) {
          if (make_seed_path(mode, isa))
            names += fmt::format("{}{}/{}", names.empty() ? "" : ", ", mode_name(mode), isa_name(isa));
        }
      }
      throw std::invalid_argument(
          fmt::format("--path {} is not a low-precision path this CPU runs (it runs {}).", path_first, names));
    }
    std::erase_if(out, [&](const SeedPath& p) { return p.info.name == path_first; });
    out.insert(out.begin(), *first);
  }
  return out;
}

Weights init_weights(std::size_t d, std::size_t h, std::uint64_t seed) {
  Weights w;
  w.d = d;
  w.h = h;
  auto glorot = [seed](std::vector<float>& v, std::size_t fan_in, std::size_t fan_out, std::string_view role) {
    det::Xoshiro256ss rng(seed, det::name_key("diagnose"), det::name_key(role), 0);
    const double a = std::sqrt(6.0 / double(fan_in + fan_out));
    v.resize(fan_in * fan_out);
    for (float& x : v) x = float(a * rng.symmetric());
  };
  glorot(w.w1, d, h, "W1");
  glorot(w.w2, h, 1, "W2");
  w.b1.assign(h, 0.0f);
  w.b2.assign(1, 0.0f);
  return w;
}

SeedRunner::SeedRunner(const SeedPath& p, std::size_t d, std::size_t h, std::size_t max_rows)
    : p_(p), d_(d), h_(h), max_rows_(max_rows) {
  const DType t = p.info.storage;
  x_.resize(t, max_rows * d);
  y_.resize(t, max_rows);
  w1_.resize(t, d * h);
  b1_.resize(t, h);
  w2_.resize(t, h);
  b2_.resize(t, 1);
  hid_.resize(t, max_rows * h);
  pred_.resize(t, max_rows);
  dpred_.resize(t, max_rows);
  dhid_.resize(t, max_rows * h);
  dw1_.resize(t, d * h);
  db1_.resize(t, h);
  dw2_.resize(t, h);
  db2_.resize(t, 1);
  grads_.resize(d * h + h + h + 1);
}

void SeedRunner::set_weights(const Weights& w) {
  // The f32 master weights are rounded once to the storage type, as a mixed-precision framework casts them.
  for (std::size_t i = 0; i < w.w1.size(); ++i) w1_.set(i, w.w1[i]);
  for (std::size_t i = 0; i < w.b1.size(); ++i) b1_.set(i, w.b1[i]);
  for (std::size_t i = 0; i < w.w2.size(); ++i) w2_.set(i, w.w2[i]);
  b2_.set(0, w.b2[0]);
}

namespace {

/// Calls f(i, value widened exactly) for the first n elements of b, with the type's switch outside the loop.
template <class F>
void for_each_value(const TypedBuffer& b, std::size_t n, F f) {
  switch (b.type()) {
    case DType::f32: {
      const float* p = static_cast<const float*>(b.data());
      for (std::size_t i = 0; i < n; ++i) f(i, double(p[i]));
      break;
    }
    case DType::f16: {
      const f16* p = static_cast<const f16*>(b.data());
      for (std::size_t i = 0; i < n; ++i) f(i, to_f64(p[i]));
      break;
    }
    case DType::bf16: {
      const bf16* p = static_cast<const bf16*>(b.data());
      for (std::size_t i = 0; i < n; ++i) f(i, double(to_f32(p[i])));
      break;
    }
  }
}

/// Rounds n values once into dst's storage type.
template <class T>
void convert_into(TypedBuffer& dst, const T* src, std::size_t n) {
  void* out = dst.data();
  switch (dst.type()) {
    case DType::f32:
      for (std::size_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = float(src[i]);
      break;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) static_cast<f16*>(out)[i] = to_f16(src[i]);
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, float>) {
          static_cast<bf16*>(out)[i] = to_bf16(src[i]);  // a float rounds once to bf16
        } else {
          static_cast<bf16*>(out)[i] = to_bf16_exact(src[i]);
        }
      }
      break;
  }
}

template <class T, class Row>
void transpose(std::vector<T>& dst, const Table& t, std::size_t m, Row row) {
  const std::size_t d = t.cols();
  dst.resize(m * d);
  for (std::size_t c = 0; c < d; ++c) {
    const T* col = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      col = t.column_f32(c);
    } else {
      col = t.column_f64(c);
    }
    for (std::size_t i = 0; i < m; ++i) dst[i * d + c] = col[row(i)];
  }
}

}  // namespace

void Staged::fill(const Table& x, const Table& y, std::size_t first, std::size_t count, const std::size_t* rows) {
  m = count;
  d = x.cols();
  row0 = first;
  idx = rows;
  f32 = x.is_f32() && y.is_f32();
  auto fill_with = [&](auto row) {
    if (f32) {
      transpose(xf, x, m, row);
      transpose(yf, y, m, row);
    } else if (x.is_f32()) {  // mixed: widen the float table's values to double, exactly
      std::vector<float> tmp;
      transpose(tmp, x, m, row);
      xd.assign(tmp.begin(), tmp.end());
      transpose(yd, y, m, row);
    } else if (y.is_f32()) {
      transpose(xd, x, m, row);
      std::vector<float> tmp;
      transpose(tmp, y, m, row);
      yd.assign(tmp.begin(), tmp.end());
    } else {
      transpose(xd, x, m, row);
      transpose(yd, y, m, row);
    }
  };
  if (rows != nullptr) {
    fill_with([rows](std::size_t i) { return rows[i]; });
  } else {
    fill_with([first](std::size_t i) { return first + i; });
  }
}

void SeedRunner::load(const Table& x, const Table& y, std::size_t row0, std::size_t m, const std::size_t* idx) {
  own_.fill(x, y, row0, m, idx);
  load(own_);
}

void SeedRunner::load(const Staged& s) {
  if (s.m > max_rows_ || s.d != d_) throw std::logic_error("SeedRunner::load: a batch the runner cannot hold");
  m_ = s.m;
  row0_ = s.row0;
  idx_ = s.idx;
  if (s.f32) {
    convert_into(x_, s.xf.data(), s.m * d_);
    convert_into(y_, s.yf.data(), s.m);
  } else {
    convert_into(x_, s.xd.data(), s.m * d_);
    convert_into(y_, s.yd.data(), s.m);
  }
}

BatchForward SeedRunner::forward() {
  const std::size_t m = m_;
  p_.fwd->dense(DenseArgs{m, h_, d_, x_.data(), w1_.data(), b1_.data(), hid_.data(), Act::relu});
  p_.fwd->dense(DenseArgs{m, 1, h_, hid_.data(), w2_.data(), b2_.data(), pred_.data(), Act::identity});
  BatchForward r;
  r.loss = p_.loss->loss(LossArgs{m, pred_.data(), y_.data(), 1.0f, nullptr});
  std::optional<std::size_t> bad;
  for_each_value(hid_, m * h_, [&bad](std::size_t i, double v) {
    if (!bad && !std::isfinite(v)) bad = i;
  });
  if (bad) {
    r.first_nonfinite = NonFinite{"dense_1", row_of(*bad / h_), *bad % h_, hid_.get(*bad)};
    return r;
  }
  for_each_value(pred_, m, [&bad](std::size_t i, double v) {
    if (!bad && !std::isfinite(v)) bad = i;
  });
  if (bad) {
    r.first_nonfinite = NonFinite{"dense_2", row_of(*bad), 0, pred_.get(*bad)};
    return r;
  }
  if (!std::isfinite(r.loss)) r.first_nonfinite = loss_culprit(r.loss);
  return r;
}

std::optional<NonFinite> SeedRunner::loss_culprit(double loss) const {
  // The loss is one number: point at the first row whose squared error cannot be stored, the usual culprit;
  // failing that, at the row where the running sum of squared errors passes the largest finite value (a path
  // that accumulates in the storage type overflows there even though every term fits).
  const double limit = max_finite(p_.info.storage);
  std::optional<std::size_t> single, running;
  double sum = 0;
  for (std::size_t i = 0; i < m_ && !single; ++i) {
    const double e = pred_.get(i) - y_.get(i);
    if (e * e > limit) single = i;
    sum += e * e;
    if (!running && sum > limit) running = i;
  }
  NonFinite n{"loss", row_of(single.value_or(running.value_or(0))), 0, loss};
  n.accumulated = !single.has_value();
  return n;
}

const std::vector<double>& SeedRunner::gradients(double S, std::size_t& nonfinite) {
  const std::size_t m = m_;
  // Loss scales are powers of two (or halvings of them): exact in f32.
  p_.loss->loss(LossArgs{m, pred_.data(), y_.data(), float(S), dpred_.data()});
  p_.bwd->dense_bwd(
      DenseBwdArgs{m, 1, h_, hid_.data(), w2_.data(), dpred_.data(), dhid_.data(), dw2_.data(), db2_.data()});
  // ReLU's derivative: zero where the stored activation is zero (the kernels' relu maps x < 0 to +0); a NaN
  // activation keeps its gradient, so a non-finite value is never hidden.
  if (hid_.type() == DType::f32) {
    const float* hid = static_cast<const float*>(hid_.data());
    float* dhid = static_cast<float*>(dhid_.data());
    for (std::size_t i = 0; i < m * h_; ++i) dhid[i] = hid[i] == 0.0f ? 0.0f : dhid[i];
  } else {  // fp16 and bf16: a zero of either sign has no bits but the sign; +0 is all zero bits
    const std::uint16_t* hid = static_cast<const std::uint16_t*>(hid_.data());
    std::uint16_t* dhid = static_cast<std::uint16_t*>(dhid_.data());
    for (std::size_t i = 0; i < m * h_; ++i) dhid[i] = (hid[i] & 0x7FFFu) == 0 ? std::uint16_t{0} : dhid[i];
  }
  p_.bwd->dense_bwd(DenseBwdArgs{m, h_, d_, x_.data(), w1_.data(), dhid_.data(), nullptr, dw1_.data(), db1_.data()});
  nonfinite = 0;
  std::size_t k = 0;
  for (const TypedBuffer* b : {&dw1_, &db1_, &dw2_, &db2_}) {
    double* out = grads_.data() + k;
    for_each_value(*b, b->size(), [&nonfinite, out](std::size_t i, double v) {
      if (!std::isfinite(v)) ++nonfinite;
      out[i] = v;
    });
    k += b->size();
  }
  return grads_;
}

}  // namespace halfmap::diagnose
