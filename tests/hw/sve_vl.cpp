// Compiled with -march=armv8.2-a+sve only: the running SVE vector length, read with the instruction itself.
#include <arm_sve.h>

#include <cstdint>

namespace halfmap::test::hw {

std::uint64_t sve_vector_bytes() { return svcntb(); }

}  // namespace halfmap::test::hw
