// Scratch memory that kernels keep between calls: a thread_local std::vector per use, grown to the largest size
// asked for and never shrunk. A kernel that allocated per call would pay for the allocation at every call, and
// glibc returns a large freed block to the OS, so the next call page-faults it in again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace halfmap::detail {

/// The first `count` elements of `buf`, which grows to hold them and never shrinks: resize to a smaller size and
/// back would value-initialise the elements again, a memset of the whole block at every call that alternates two
/// sizes (attention's GEMMs at len 512: a 1 MiB accumulator zeroed in each dense call, 2 % of its time).
template <class P>
P* grown(std::vector<P>& buf, std::size_t count) {
  if (buf.size() < count) buf.resize(count);
  return buf.data();
}

/// `count` elements of `buf`, from a 64-byte boundary. A large vector's storage starts 16 bytes past a page
/// boundary (malloc's header), so without this one of the two 32-byte loads of a 64-byte panel row (avx2's 16
/// f32 columns) would straddle two cache lines at every k.
template <class P>
P* aligned_scratch(std::vector<P>& buf, std::size_t count) {
  constexpr std::size_t kAlign = 64, kPad = kAlign / sizeof(P);
  grown(buf, count + kPad);
  const auto addr = reinterpret_cast<std::uintptr_t>(buf.data());
  return buf.data() + ((kAlign - addr % kAlign) % kAlign) / sizeof(P);
}

}  // namespace halfmap::detail
