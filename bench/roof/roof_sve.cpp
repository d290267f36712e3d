// roof/fma/sve: FMLA on .s (svcntw() f32 lanes at the running vector length, 2 flops each).
#include <arm_sve.h>

#include "roof_isa.hpp"

namespace halfmap::bench::roof {
namespace {

float fma(std::size_t reps) {
  // acc = acc + x·x with x = 2^-7: each step adds 2^-14 to a lane, which stops growing at 2^10 (the addend falls
  // below half an ulp): normal and finite however long the run. Eight chains (sizeless types cannot be arrays).
  const svbool_t pg = svptrue_b32();
  const svfloat32_t x = svdup_f32(0x1p-7f);
  svfloat32_t a0 = svdup_f32(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (std::size_t r = 0; r < reps; ++r) {
    a0 = svmla_f32_x(pg, a0, x, x);
    a1 = svmla_f32_x(pg, a1, x, x);
    a2 = svmla_f32_x(pg, a2, x, x);
    a3 = svmla_f32_x(pg, a3, x, x);
    a4 = svmla_f32_x(pg, a4, x, x);
    a5 = svmla_f32_x(pg, a5, x, x);
    a6 = svmla_f32_x(pg, a6, x, x);
    a7 = svmla_f32_x(pg, a7, x, x);
  }
  const svfloat32_t s = svadd_f32_x(pg, svadd_f32_x(pg, svadd_f32_x(pg, a0, a1), svadd_f32_x(pg, a2, a3)),
                                    svadd_f32_x(pg, svadd_f32_x(pg, a4, a5), svadd_f32_x(pg, a6, a7)));
  return svaddv_f32(pg, s);
}

}  // namespace

IsaLoops loops_sve() {
  return {"fmla z.s (f32, vector-length agnostic)", double(svcntw()) * 2 * 8, fma, {}, 0, {}, nullptr, 0, nullptr};
}

}  // namespace halfmap::bench::roof
