// Per-tensor scaling recipes of fp8 training (docs/numerics.md, "fp8 and MX"): the scale s by which a tensor
// is multiplied before its cast to fp8 (and divided after), chosen as NVIDIA's Transformer Engine chooses it
// (transformer_engine.common.recipe: Float8CurrentScaling and DelayedScaling; its default scaling-factor rule):
//
//   s = (fp8_max / amax) / 2^margin, computed in float32; where amax is 0 or not finite, the previous scale is kept
//   (1 for a tensor's first cast).
//
//   current scaling  amax = max |x| of the tensor being cast: its largest value lands on fp8_max.
//   delayed scaling  amax = the maximum of an amax history: the amaxes of the last history_len casts (default
//                    1024, margin 0), this cast's own amax recorded only after it (the scale is computed from the
//                    previous steps and updated after each). A tensor whose amax jumps up by 2^k at one step is
//                    cast once with the old scale (k binades too large: E4M3 saturates, E5M2 saturates or
//                    overflows); a one-step spike keeps the scale 2^k too small for history_len steps, which
//                    pushes small values into subnormals and zero.
//   HYBRID format    Transformer Engine's default: E4M3 (fp8_max 448) for the forward's tensors, E5M2 (57344) for
//                    the gradients.
// The MX formats scale per block of 32 instead (include/halfmap/mx.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "halfmap/fp8.hpp"

namespace halfmap {

inline constexpr std::size_t kTeAmaxHistoryLen = 1024;  // DelayedScaling's default amax_history_len
inline constexpr int kTeMargin = 0;                     // and margin

/// Transformer Engine's scaling factor: (fp8_max / amax) / 2^margin in float32, or `previous` where amax is not a
/// positive finite number, and the largest float32 where the quotient overflows (an amax below fp8_max / FLT_MAX,
/// about 2^-119.2 for E4M3: its compute_scale_from_amax, transformer_engine/common/recipe/recipe_common.cuh).
inline float fp8_scale(float amax, Fp8 f, int margin = kTeMargin, float previous = 1.0f) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  const float s = fp8_format(f).max / amax / std::ldexp(1.0f, margin);
  return std::isinf(s) ? std::numeric_limits<float>::max() : s;
}

/// Delayed scaling of one tensor across steps: cast with scale(), then record() the amax that cast saw.
class DelayedScaler {
 public:
  explicit DelayedScaler(Fp8 f, std::size_t history_len = kTeAmaxHistoryLen, int margin = kTeMargin)
      : f_(f), margin_(margin), history_(std::max<std::size_t>(history_len, 1), 0.0f) {}

  /// The scale of the next cast.
  float scale() const { return scale_; }
  /// Records the amax of the cast just made (max |x| of the unscaled tensor) and updates the scale from the
  /// maximum over the history, which then holds this amax and the history_len - 1 before it.
  void record(float amax) {
    history_[next_] = amax;
    next_ = (next_ + 1) % history_.size();
    float m = 0.0f;  // torch.max over the history: a NaN anywhere makes it NaN, and the scale is then kept
    for (float a : history_) m = std::isnan(a) ? a : std::isnan(m) ? m : std::max(m, a);
    scale_ = fp8_scale(m, f_, margin_, scale_);
  }

 private:
  Fp8 f_;
  int margin_;
  std::vector<float> history_;
  std::size_t next_ = 0;
  float scale_ = 1.0f;
};

}  // namespace halfmap
