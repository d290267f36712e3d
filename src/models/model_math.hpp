// The f16 models' own exp, erf and tanh: halfmap's exp_f32, erf_f32 and tanh_f32 written again from their
// definitions in include/halfmap/math.hpp, in plain scalar code that shares nothing with the kernels' vector
// templates, so that a bug in those templates (or in the scalar functions built from them) shows as a mismatch
// between a kernel and its model. nn_test and gelu_test check that these equal exp_f32, erf_f32 and tanh_f32 on
// every input the f16 models give them (every fp16 value).
#pragma once

#include "halfmap/half.hpp"

namespace halfmap::models {

/// exp_f32's algorithm (math.hpp), step by step.
float exp(float x);
/// to_f16(exp(to_f32(h))): exp_f16.
f16 exp16(f16 h);
/// erf_f32's: Abramowitz and Stegun 7.1.26 on |z| with this exp.
float erf(float z);
/// tanh_f32's: 1 - 2/(exp(2u) + 1).
float tanh(float u);

}  // namespace halfmap::models
