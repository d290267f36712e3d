// Loss scaling as the frameworks ship it (docs/numerics.md, "Loss scaling"): the constants
// that the sweep's loss-scale windows and `halfmap diagnose`'s window and simulation both use.
#pragma once

#include <cstddef>

namespace halfmap::loss_scale {

/// Keras `LossScaleOptimizer` (mixed_float16) starts at 2^15, PyTorch `torch.amp.GradScaler` at 2^16.
inline constexpr int kKerasInitialLog2 = 15;
inline constexpr int kPytorchInitialLog2 = 16;
inline constexpr double kKerasInitial = double(1u << kKerasInitialLog2);      // 32768
inline constexpr double kPytorchInitial = double(1u << kPytorchInitialLog2);  // 65536
/// Both double the scale after this many consecutive steps with finite gradients (`growth_interval`)...
inline constexpr std::size_t kGrowthInterval = 2000;
/// ...and on a non-finite gradient skip the step and multiply the scale by this (`backoff_factor`).
inline constexpr double kBackoffFactor = 0.5;
inline constexpr double kGrowthFactor = 2.0;

}  // namespace halfmap::loss_scale
