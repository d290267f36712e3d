// Packing for the vdpbf16ps pair tile (kernels.cpp's Bf16Gemm): the same panels as gemm.hpp's pack_panels with
// kKPack = 2, bit for bit (for each micro-panel of MR rows, for each k pair q, the MR (x[2q], x[2q+1]) pairs as
// 32-bit words; rows and k beyond the operand are zeros), written with AVX-512 shuffles instead of one 16-bit
// move per element. At 256³ the generic packing of A and B was 8 % of the bf16 forward pass.
//   rows contiguous along k (cs == 1: X, dY as A; Wᵀ as B): each pair is one 32-bit word of its row, so a panel
//     is an 8-row × 16-word transpose per 32 k (pack_rows);
//   rows contiguous across the panel (rs == 1: W as B, Xᵀ as A): a pair interleaves two runs of the panel's
//     columns, one per k (pack_cols).
// Whole panels and whole 32-k chunks take the vector path; the rest (the last panel, the last < 32 k) the scalar
// one, which writes the same values.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/gemm.hpp"

namespace halfmap::paths::avx512bf16 {

/// The pair (src(r, 2q), src(r, 2q + 1)) of rows [r0, r0 + rows) and k [p0, p0 + kc) as one word, low half first;
/// zero past the operand.
inline std::uint32_t pair_at(detail::View<std::uint16_t> src, std::size_t r, std::size_t rows, std::size_t p,
                             std::size_t kc, std::size_t r0, std::size_t p0) {
  if (r >= rows || p >= kc) return 0;
  const std::uint32_t lo = src.at(r0 + r, p0 + p);
  const std::uint32_t hi = p + 1 < kc ? src.at(r0 + r, p0 + p + 1) : 0;
  return lo | hi << 16;
}

/// Scalar: panel j's k pairs [q_begin, groups), every one of its MR rows (zeros past `rows`).
template <std::size_t MR>
void pack_tail(detail::View<std::uint16_t> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
               std::size_t j, std::size_t q_begin, std::uint32_t* panel) {
  const std::size_t groups = (kc + 1) / 2;
  for (std::size_t q = q_begin; q < groups; ++q) {
    for (std::size_t i = 0; i < MR; ++i) panel[q * MR + i] = pair_at(src, j * MR + i, rows, 2 * q, kc, r0, p0);
  }
}

/// 8 rows of 16 words each (row i at rows[i]) stored transposed: word c of row i goes to out[c * ld + i].
inline void transpose_8x16(const std::uint16_t* const* row, std::size_t offset, std::uint32_t* out, std::size_t ld) {
  __m512i r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm512_loadu_si512(row[i] + offset);
  __m512i lo[4], hi[4];
  for (int p = 0; p < 4; ++p) {
    lo[p] = _mm512_unpacklo_epi32(r[2 * p], r[2 * p + 1]);  // lane l: rows 2p, 2p+1 of words 4l, 4l+1
    hi[p] = _mm512_unpackhi_epi32(r[2 * p], r[2 * p + 1]);  // words 4l+2, 4l+3
  }
  // a[c] (rows 0-3) and b[c] (rows 4-7), lane l: word 4l + c of the four rows.
  const __m512i a[4] = {_mm512_unpacklo_epi64(lo[0], lo[1]), _mm512_unpackhi_epi64(lo[0], lo[1]),
                        _mm512_unpacklo_epi64(hi[0], hi[1]), _mm512_unpackhi_epi64(hi[0], hi[1])};
  const __m512i b[4] = {_mm512_unpacklo_epi64(lo[2], lo[3]), _mm512_unpackhi_epi64(lo[2], lo[3]),
                        _mm512_unpacklo_epi64(hi[2], hi[3]), _mm512_unpackhi_epi64(hi[2], hi[3])};
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                last = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int c = 0; c < 4; ++c) {
    // 256-bit halves: the 8 rows of word c, 4 + c (from lanes 0, 1), then 8 + c, 12 + c (lanes 2, 3).
    const __m512i x = _mm512_permutex2var_epi64(a[c], first, b[c]), y = _mm512_permutex2var_epi64(a[c], last, b[c]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c * ld), _mm512_castsi512_si256(x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (4 + c) * ld), _mm512_extracti64x4_epi64(x, 1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (8 + c) * ld), _mm512_castsi512_si256(y));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (12 + c) * ld), _mm512_extracti64x4_epi64(y, 1));
  }
}

/// Rows contiguous along k (src.cs == 1): whole panels by 32-k chunks, 8 rows at a time.
template <std::size_t MR>
void pack_rows(detail::View<std::uint16_t> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
               std::uint16_t* dst) {
  static_assert(MR % 8 == 0);
  const std::size_t groups = (kc + 1) / 2, panels = (rows + MR - 1) / MR, chunks = kc / 32;
  for (std::size_t j = 0; j < panels; ++j) {
    auto* panel = reinterpret_cast<std::uint32_t*>(dst + j * MR * groups * 2);
    if ((j + 1) * MR > rows) {  // the last, partial panel
      pack_tail<MR>(src, r0, rows, p0, kc, j, 0, panel);
      continue;
    }
    for (std::size_t b = 0; b < MR / 8; ++b) {
      const std::uint16_t* row[8];
      for (std::size_t i = 0; i < 8; ++i) row[i] = &src.at(r0 + j * MR + b * 8 + i, p0);
      for (std::size_t c = 0; c < chunks; ++c) transpose_8x16(row, c * 32, panel + c * 16 * MR + b * 8, MR);
    }
    pack_tail<MR>(src, r0, rows, p0, kc, j, chunks * 16, panel);
  }
}

/// Rows contiguous across the panel (src.rs == 1): the k pair's two runs of MR values interleaved. 8-row panels
/// (A's) take the pair q of four panels at a time: 32 values of each run, two shuffles, a 32-byte store into each
/// panel, where one panel at a time made 16-byte loads and stores (Aᵀ in dW = Xᵀ·dY: P in bf16 attention's
/// dV = Pᵀ·dO, 512 × 512 at len 512).
template <std::size_t MR>
void pack_cols(detail::View<std::uint16_t> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
               std::uint16_t* dst) {
  static_assert(MR == 8 || MR % 32 == 0);
  const std::size_t groups = (kc + 1) / 2, panels = (rows + MR - 1) / MR, pairs = kc / 2, whole = rows / MR;
  const __m512i first = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                         5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i last = _mm512_add_epi16(first, _mm512_set1_epi16(16));
  auto panel_of = [&](std::size_t j) { return reinterpret_cast<std::uint32_t*>(dst + j * MR * groups * 2); };
  if constexpr (MR == 8) {
    for (std::size_t q = 0; q < pairs; ++q) {
      const std::uint16_t* s0 = &src.at(r0, p0 + 2 * q);
      const std::uint16_t* s1 = &src.at(r0, p0 + 2 * q + 1);
      std::size_t j = 0;
      for (; j + 4 <= whole; j += 4) {  // columns 8j to 8j + 31: word c of lo (hi) is column 8j + c (+ 16)
        const __m512i x0 = _mm512_loadu_si512(s0 + j * MR), x1 = _mm512_loadu_si512(s1 + j * MR);
        const __m512i lo = _mm512_permutex2var_epi16(x0, first, x1), hi = _mm512_permutex2var_epi16(x0, last, x1);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(panel_of(j) + q * MR), _mm512_castsi512_si256(lo));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(panel_of(j + 1) + q * MR), _mm512_extracti64x4_epi64(lo, 1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(panel_of(j + 2) + q * MR), _mm512_castsi512_si256(hi));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(panel_of(j + 3) + q * MR), _mm512_extracti64x4_epi64(hi, 1));
      }
      for (; j < whole; ++j) {
        const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + j * MR));
        const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + j * MR));
        std::uint32_t* d = panel_of(j) + q * MR;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(x0, x1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 4), _mm_unpackhi_epi16(x0, x1));
      }
    }
  } else {
    for (std::size_t j = 0; j < whole; ++j) {
      for (std::size_t q = 0; q < pairs; ++q) {
        const std::uint16_t* s0 = &src.at(r0 + j * MR, p0 + 2 * q);
        const std::uint16_t* s1 = &src.at(r0 + j * MR, p0 + 2 * q + 1);
        std::uint32_t* d = panel_of(j) + q * MR;
        for (std::size_t i = 0; i < MR; i += 32) {
          const __m512i x0 = _mm512_loadu_si512(s0 + i), x1 = _mm512_loadu_si512(s1 + i);
          _mm512_storeu_si512(d + i, _mm512_permutex2var_epi16(x0, first, x1));
          _mm512_storeu_si512(d + i + 16, _mm512_permutex2var_epi16(x0, last, x1));
        }
      }
    }
  }
  for (std::size_t j = 0; j < whole; ++j) pack_tail<MR>(src, r0, rows, p0, kc, j, pairs, panel_of(j));  // odd kc
  if (whole < panels) pack_tail<MR>(src, r0, rows, p0, kc, whole, 0, panel_of(whole));  // the partial panel
}

/// gemm.hpp's pack_panels for kKPack = 2 (see the top of this file).
template <std::size_t MR>
void pack_pairs(detail::View<std::uint16_t> src, std::size_t r0, std::size_t rows, std::size_t p0, std::size_t kc,
                std::uint16_t* dst) {
  if (src.cs == 1) {
    pack_rows<MR>(src, r0, rows, p0, kc, dst);
  } else {
    pack_cols<MR>(src, r0, rows, p0, kc, dst);
  }
}

}  // namespace halfmap::paths::avx512bf16
