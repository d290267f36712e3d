// The families' common parts: the base draws and the factory (an op's family is its row's in ops.hpp).
#include "sweep/experiment.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "halfmap/detmath.hpp"

namespace halfmap::sweep {

std::vector<double> stream_draw(std::uint64_t seed, std::string_view stream, Dist d, unsigned role, std::size_t count) {
  det::Xoshiro256ss rng(seed, det::name_key(stream), det::name_key(dist_name(d)), role);
  det::Normal normal;
  std::vector<double> v(count);
  for (double& x : v) {
    switch (d) {
      case Dist::uniform:
        x = rng.symmetric();
        break;
      case Dist::normal:
        x = normal(rng);
        break;
      case Dist::lognormal: {
        const double z = normal(rng);
        const bool negative = (rng.next() >> 63) != 0;
        x = negative ? -det::exp(z) : det::exp(z);
        break;
      }
    }
  }
  return v;
}

namespace {

/// The base draw of one role: `count` values from the distribution, from the stream (seed, family, dist, role).
/// Reductions share their draws (sum, sumsq, maxabs and dot see the same x), and so do softmax and softmax_naive.
std::vector<double> base_draw(std::uint64_t seed, FamilyKind fam, Dist d, unsigned role, std::size_t count) {
  return stream_draw(seed, family_name(fam), d, role, count);
}

}  // namespace

std::vector<double> Setup::base(unsigned role, std::size_t count) const {
  if (role < o.base_override.size() && !o.base_override[role].empty()) {
    if (o.base_override[role].size() != count) {
      throw std::invalid_argument(fmt::format("base override of role {} has {} values, expected {}.", role,
                                              o.base_override[role].size(), count));
    }
    return o.base_override[role];
  }
  return base_draw(o.seed, kind, d, role, count);
}

void Setup::add_input(Family& f, const char* name, unsigned role, std::size_t count, bool scaled) const {
  f.inputs.push_back({});
  Input& in = f.inputs.back();
  in.tensor.name = name;
  in.tensor.resize(storage(), count);
  in.base = base(role, count);
  in.scaled = scaled;
}

bool Family::terms_flushed() const {
  for (const Input& in : inputs) {
    for (std::size_t i = 0; i < in.base.size(); ++i) {
      if (in.base[i] != 0 && in.tensor.val[i] != 0) return false;
    }
  }
  return true;
}

std::unique_ptr<Family> make_family(const Options& o, const Experiment& e, Dist d) {
  const Setup s{o, e, d, family_of(e.fwd.op)};
  std::unique_ptr<Family> f;
  switch (s.kind) {
    case FamilyKind::reduce:
      f = make_reduce(s);
      break;
    case FamilyKind::dense:
      f = make_dense(s);
      break;
    case FamilyKind::mse:
      f = make_mse(s);
      break;
    case FamilyKind::softmax:
      f = make_softmax(s);
      break;
    case FamilyKind::xent:
      f = make_xent(s);
      break;
    case FamilyKind::norm:
      f = make_norm(s);
      break;
    case FamilyKind::gelu:
      f = make_gelu(s);
      break;
    case FamilyKind::attention:
      f = make_attention(s);
      break;
  }
  if (f->oracle.empty()) f->oracle.resize(f->out.size());
  for (const Tensor& g : f->grads) f->unit.emplace_back(g.size());
  return f;
}

}  // namespace halfmap::sweep
