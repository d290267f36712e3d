// The sweep's experiment families behind one interface (src/sweep/{reduce,dense,mse,softmax,xent}.cpp): each
// family owns its tensors, runs its kernels on the stored inputs and computes its f64 oracles; the Runner
// (cell.hpp) stores the inputs, counts and classifies. Internal to src/sweep.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "halfmap/storage.hpp"
#include "halfmap/sweep.hpp"

namespace halfmap::sweep {

/// A tensor in the kernel's storage type, with its stored values widened (exactly) to f64 for the oracles.
struct Tensor : TypedBuffer {
  const char* name = "";  // a literal: cells keep a view of it
  std::vector<double> val;
  void resize(DType t, std::size_t n) {
    TypedBuffer::resize(t, n);
    val.assign(n, 0.0);
  }
  /// Reads every stored element back into `val` (after a kernel wrote the buffer).
  void reload() {
    const std::size_t n = val.size();
    switch (type()) {
      case DType::f32: {
        const auto* p = static_cast<const float*>(data());
        for (std::size_t i = 0; i < n; ++i) val[i] = p[i];
        break;
      }
      case DType::f16: {
        const auto* p = static_cast<const f16*>(data());
        for (std::size_t i = 0; i < n; ++i) val[i] = to_f64(p[i]);
        break;
      }
      case DType::bf16: {
        const auto* p = static_cast<const bf16*>(data());
        for (std::size_t i = 0; i < n; ++i) val[i] = double(to_f32(p[i]));
        break;
      }
    }
  }
};

/// An input: stored at every s from `base` (times s when `scaled`).
struct Input {
  Tensor tensor;
  std::vector<double> base;
  bool scaled = true;
};

/// An op's experiment family: its row's in ops.hpp.
using FamilyKind = SweepFamily;
constexpr FamilyKind family_of(Op op) { return op_info(op).sweep; }
constexpr std::string_view family_name(FamilyKind f) { return sweep_family_name(f); }
/// `count` draws of distribution d from the stream (seed, stream, d, role): the families' base draws use their
/// family's name as the stream.
std::vector<double> stream_draw(std::uint64_t seed, std::string_view stream, Dist d, unsigned role, std::size_t count);

/// One experiment family. The Runner fills `inputs` (their tensors and `val`) before forward(); everything else
/// is the family's to fill.
class Family {
 public:
  virtual ~Family() = default;
  /// Runs the forward kernel on the stored inputs: `out.val` (widened) and `oracle` (f64, from the stored inputs).
  virtual void forward() = 0;
  /// The gradient oracles at S = 1 into `unit` (one per gradient tensor). A gradient's oracle at S is S times
  /// this, so only its zero pattern is used: it does not depend on S.
  virtual void unit_oracle() {}
  /// Runs the gradient kernel(s) at loss scale S into `grads` (stored; the Runner reloads them).
  virtual void gradient(double /*S*/) {}
  /// The forward output's name in cells ("Y", "loss", an op name) and its stage ("forward" or "loss").
  virtual std::string_view out_name() const = 0;
  virtual std::string_view out_stage() const { return "forward"; }
  /// True when the output is one number, reported as fwd_value and fwd_oracle.
  virtual bool scalar_out() const { return false; }
  /// A stored upstream gradient whose first non-finite value comes before the gradients' (dense: dY).
  virtual const Tensor* upstream() const { return nullptr; }
  /// Whether every term of every output lost a factor to flushing when the inputs were stored (docs/thresholds.md:
  /// `vanished`): what is left is zero because of underflow, not cancellation. Monotone in s, as
  /// storing is. Default: every input value that was nonzero before storage is zero after it (sum, sumsq, maxabs,
  /// mse); dot and dense look at their products; softmax and xent never vanish (their outputs are never zero).
  virtual bool terms_flushed() const;
  /// How the exact result of the given (unstored) data grows with s: 1 (linear: sum, maxabs, dense), 2
  /// (quadratic: sumsq, dot, mse), 0 (neither: softmax, xent). With `given_max`, the largest |output| of the
  /// given data at s = 1, it tells when every output of the given data rounds to zero in the output type.
  virtual int homogeneity() const { return 0; }
  /// The largest magnitude of an output's exact value on the given data at s = 1 (computed once by the Runner
  /// through given_max_at_unit_scale()); unused when homogeneity() is 0.
  virtual double given_max_at_unit_scale() const { return 0; }
  /// A forward intermediate the kernel reports besides its output (layernorm's μ and v): how many of its values
  /// are not finite, and the first one (a static name, an index, the value) when there is one. Such a value is a
  /// forward overflow even when every output stays finite.
  struct HiddenFirst {
    std::string_view name;
    std::size_t index = 0;
    double value = 0;
  };
  virtual std::size_t hidden_nonfinite(HiddenFirst& /*first*/) const { return 0; }

  std::vector<Input> inputs;  // in data-flow order; inputs[0] is the one --plant-nan poisons
  Tensor out;
  std::vector<double> oracle;
  /// Each output's condition scale, the sum of the magnitudes of its terms (Σ|x|, Σ|x y|, Σ_p |X W|, ...), filled
  /// by forward() where terms can cancel; empty where they cannot (then |oracle| serves). The relative error of an
  /// output whose exact value is tiny by cancellation is measured against it (OutAcc).
  std::vector<double> cond;
  std::vector<Tensor> grads;
  std::vector<std::vector<double>> unit;

 protected:
  const double* in(std::size_t r) const { return inputs[r].tensor.val.data(); }
};

/// What a family's constructor needs: the options, the experiment, the distribution and the inputs' base draws.
struct Setup {
  const Options& o;
  const Experiment& e;
  Dist d;
  FamilyKind kind;
  /// The base values of one role: the test hook's override if given, else `count` draws from the stream
  /// (seed, family, dist, role). Throws std::invalid_argument when an override has the wrong length.
  std::vector<double> base(unsigned role, std::size_t count) const;
  /// Appends an input of `count` elements of the kernel's storage type, with the base values of `role`.
  void add_input(Family& f, const char* name, unsigned role, std::size_t count, bool scaled) const;
  DType storage() const { return e.fwd.storage; }
};

/// The stable softmax in f64: the oracle of softmax, softmax_naive and of xent's probabilities.
void softmax_oracle(const double* x, std::size_t rows, std::size_t cols, double* y);

std::unique_ptr<Family> make_reduce(const Setup& s);
std::unique_ptr<Family> make_dense(const Setup& s);
std::unique_ptr<Family> make_mse(const Setup& s);
std::unique_ptr<Family> make_softmax(const Setup& s);
std::unique_ptr<Family> make_xent(const Setup& s);
std::unique_ptr<Family> make_norm(const Setup& s);
std::unique_ptr<Family> make_gelu(const Setup& s);
std::unique_ptr<Family> make_attention(const Setup& s);

/// The family of the experiment's forward op, with its tensors allocated and its base inputs drawn.
std::unique_ptr<Family> make_family(const Options& o, const Experiment& e, Dist d);

}  // namespace halfmap::sweep
