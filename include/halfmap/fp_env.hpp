// The floating-point environment a run executes under. halfmap only reads it: it never turns flushing on,
// because its job is to see underflow.
#pragma once

#include <string>

namespace halfmap {

struct FpEnv {
  std::string arch;       // "x86-64" or "arm64"
  bool ftz = false;       // x86 MXCSR.FTZ (bit 15) / arm64 FPCR.FZ (bit 24): flush f32/f64 results to zero
  bool daz = false;       // x86 MXCSR.DAZ (bit 6): treat denormal inputs as zero (arm64 FZ covers both)
  bool fz16 = false;      // arm64 FPCR.FZ16 (bit 19): flush fp16 (AVX512-FP16 never flushes fp16)
  unsigned long raw = 0;  // the MXCSR or FPCR value
  /// True when nothing is flushed: the only state halfmap's numbers are meant to be read under.
  bool ieee() const { return !ftz && !daz && !fz16; }
  std::string describe() const;
};

FpEnv read_fp_env();

}  // namespace halfmap
