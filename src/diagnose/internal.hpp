// The parts of `halfmap diagnose` (include/halfmap/diagnose.hpp), one source file each.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "diagnose/model.hpp"
#include "halfmap/diagnose.hpp"
#include "halfmap/loss_scale.hpp"

namespace halfmap::diagnose {

/// data.cpp: the statistics of one column (values of the column in row order).
ColumnStats column_stats(std::string name, const std::vector<double>& values);

/// scaling.cpp: gradient statistics of a path at scale S against the f32 reference gradients (at S = 1).
GradStats grad_stats(Runner& r, const std::vector<double>& reference, double S);
/// The loss-scale window of a path (see the header).
LossWindow loss_window(Runner& r, const std::vector<double>& reference, double share);
/// Dynamic loss scaling from `initial` (see the header); `eval` is the f32 baseline runner for the final loss.
Simulation simulate(Runner& r, Runner& eval, const Weights& start, const Options& o, std::string framework,
                    double initial);

/// render.cpp helpers shared with verdict.cpp: "2^15" for powers of two, else a short %g.
std::string scale_text(double s);
/// A number in at most 9 characters, e.g. "1.23e+05", "-0.5", "nan".
std::string num(double v);

}  // namespace halfmap::diagnose
