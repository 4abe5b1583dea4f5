// MaxPool2d: window maxima with remembered winners, and the scatter of dy back to them; plane
// by plane (sample, channel), the planes on the rank's threads (blas::parallel_ranges).
#include "ringtrain/framework/layers/maxpool2d.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {
namespace {

// Planes per thread below which the loops stay on one thread (a cnn plane is 784 floats).
constexpr std::size_t kMinPlanesPerThread = 32;

// PyTorch's rule for one step of the scan: a larger value or a NaN takes over. Written as
// selects, not a branch: on real activations the comparison is a coin flip for the
// predictor.
inline void scan(float v, std::uint32_t index, float& best_value, std::uint32_t& best) {
  const bool take = v > best_value || v != v;  // v != v: v is NaN
  best_value = take ? v : best_value;
  best = take ? index : best;
}

// The cnn's 2x2 window with stride 2, four outputs at a time with SSE2 (part of every
// x86-64 CPU). The generic loop below, with run-time k and stride, does not vectorize, even
// with k = 2 fixed (the compiler keeps the selects as branches); this one is many times
// faster (bench/README-conv.md, "Measurements behind the code comments"). Same
// scan order and rule as scan(): top-left, top-right, bottom-left, bottom-right; a larger
// value or a NaN takes over.
//   top row    t0 t1 t2 t3 t4 t5 t6 t7  -> evens (t0 t2 t4 t6) = left, odds = right
//   bottom row b0 b1 ... b7              -> the same
void pool_2x2(const float* xp, float* yp, std::uint32_t* ap, std::size_t w, std::size_t ho,
              std::size_t wo) {
  for (std::size_t oh = 0; oh < ho; ++oh) {
    const std::uint32_t top = std::uint32_t(2 * oh * w), bottom = top + std::uint32_t(w);
    float* yrow = yp + oh * wo;
    std::uint32_t* arow = ap + oh * wo;
    // Four windows from output column ow; a row whose width is not a multiple of 4 ends
    // with a group that overlaps the one before (those outputs are written twice, equal),
    // so only rows narrower than 4 outputs take the scalar loop.
    const __m128i one = _mm_set1_epi32(1), row = _mm_set1_epi32(int(w));
    auto four = [&](std::size_t ow) {
      // Window q of the four starts at column 2·(ow + q): indices top + 2·ow + {0, 2, 4, 6}.
      const __m128i index =
          _mm_add_epi32(_mm_set1_epi32(int(top + 2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
      const float* t = xp + top + 2 * ow;
      const float* b = xp + bottom + 2 * ow;
      const __m128 t_lo = _mm_loadu_ps(t), t_hi = _mm_loadu_ps(t + 4);
      const __m128 b_lo = _mm_loadu_ps(b), b_hi = _mm_loadu_ps(b + 4);
      __m128 best = _mm_shuffle_ps(t_lo, t_hi, _MM_SHUFFLE(2, 0, 2, 0));  // top-left
      __m128i best_index = index;
      auto take = [&](__m128 v, __m128i v_index) {
        const __m128 mask = _mm_or_ps(_mm_cmpgt_ps(v, best), _mm_cmpunord_ps(v, v));
        const __m128i imask = _mm_castps_si128(mask);
        best = _mm_or_ps(_mm_and_ps(mask, v), _mm_andnot_ps(mask, best));
        best_index =
            _mm_or_si128(_mm_and_si128(imask, v_index), _mm_andnot_si128(imask, best_index));
      };
      take(_mm_shuffle_ps(t_lo, t_hi, _MM_SHUFFLE(3, 1, 3, 1)), _mm_add_epi32(index, one));
      take(_mm_shuffle_ps(b_lo, b_hi, _MM_SHUFFLE(2, 0, 2, 0)), _mm_add_epi32(index, row));
      take(_mm_shuffle_ps(b_lo, b_hi, _MM_SHUFFLE(3, 1, 3, 1)),
           _mm_add_epi32(_mm_add_epi32(index, row), one));
      _mm_storeu_ps(yrow + ow, best);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(arow + ow), best_index);
    };
    std::size_t ow = 0;
    if (wo >= 4) {
      for (; ow + 4 <= wo; ow += 4) four(ow);
      if (ow < wo) four(wo - 4);
      continue;
    }
    for (; ow < wo; ++ow) {
      const std::uint32_t left = std::uint32_t(2 * ow);
      std::uint32_t best = top + left;
      float best_value = xp[best];
      scan(xp[top + left + 1], top + left + 1, best_value, best);
      scan(xp[bottom + left], bottom + left, best_value, best);
      scan(xp[bottom + left + 1], bottom + left + 1, best_value, best);
      yrow[ow] = best_value;
      arow[ow] = best;
    }
  }
}

// Backward of pool_2x2 for one plane: windows do not overlap, so every dx entry inside a
// window is written once, with dy where the window's winner was and 0 elsewhere; no
// zero-fill of dx first and no scatter. Four windows at a time: for window q the four
// candidates are compared with the remembered winner and masked,
//   tl = (a == top + 2ow) & dy,  tr = (a == top + 2ow + 1) & dy,  bl, br likewise,
// then interleaved into rows: top row = tl0 tr0 tl1 tr1 ... (unpacklo / unpackhi).
// A row or column that no window covers (odd H or W) gets 0: no gradient reaches it.
void unpool_2x2(const float* dyp, const std::uint32_t* ap, float* dxp, std::size_t h, std::size_t w,
                std::size_t ho, std::size_t wo) {
  for (std::size_t oh = 0; oh < ho; ++oh) {
    const std::uint32_t top = std::uint32_t(2 * oh * w), bottom = top + std::uint32_t(w);
    const float* dyrow = dyp + oh * wo;
    const std::uint32_t* arow = ap + oh * wo;
    float* dtop = dxp + top;
    float* dbottom = dxp + bottom;
    const __m128i one = _mm_set1_epi32(1), row = _mm_set1_epi32(int(w));
    auto four = [&](std::size_t ow) {  // windows ow .. ow + 3, as in pool_2x2
      const __m128i tl_index =
          _mm_add_epi32(_mm_set1_epi32(int(top + 2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(arow + ow));
      const __m128 g = _mm_loadu_ps(dyrow + ow);
      auto pick = [&](__m128i index) {  // g where the winner is `index`, else 0
        return _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(a, index)), g);
      };
      const __m128 tl = pick(tl_index), tr = pick(_mm_add_epi32(tl_index, one));
      const __m128i bl_index = _mm_add_epi32(tl_index, row);
      const __m128 bl = pick(bl_index), br = pick(_mm_add_epi32(bl_index, one));
      _mm_storeu_ps(dtop + 2 * ow, _mm_unpacklo_ps(tl, tr));
      _mm_storeu_ps(dtop + 2 * ow + 4, _mm_unpackhi_ps(tl, tr));
      _mm_storeu_ps(dbottom + 2 * ow, _mm_unpacklo_ps(bl, br));
      _mm_storeu_ps(dbottom + 2 * ow + 4, _mm_unpackhi_ps(bl, br));
    };
    std::size_t ow = 0;
    if (wo >= 4) {
      for (; ow + 4 <= wo; ow += 4) four(ow);
      if (ow < wo) four(wo - 4);  // overlaps the group before: writes the same values again
    } else {
      for (; ow < wo; ++ow) {
        const std::uint32_t left = top + std::uint32_t(2 * ow);
        for (const std::uint32_t q :
             {left, left + 1, left + std::uint32_t(w), left + std::uint32_t(w) + 1})
          dxp[q] = arow[ow] == q ? dyrow[ow] : 0.0f;
      }
    }
    if (w % 2 == 1) dtop[w - 1] = dbottom[w - 1] = 0.0f;
  }
  if (h % 2 == 1) std::fill_n(dxp + (h - 1) * w, w, 0.0f);
}

}  // namespace

MaxPool2d::MaxPool2d(std::size_t kernel, std::size_t stride)
    : k_(kernel), stride_(stride == 0 ? kernel : stride) {
  if (k_ == 0) throw UsageError("MaxPool2d needs kernel > 0");
}

Shape MaxPool2d::plan(const Shape& input, std::size_t max_batch) {
  if (input.size() != 3 || input[1] < k_ || input[2] < k_)
    throw UsageError("MaxPool2d(kernel " + std::to_string(k_) +
                     ") needs per-sample input (C, H, W) with H, W >= kernel, got " +
                     to_string(input));
  c_ = input[0];
  h_ = input[1];
  w_ = input[2];
  if (h_ * w_ > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("MaxPool2d: image plane " + to_string(input) + " too large");
  ho_ = (h_ - k_) / stride_ + 1;
  wo_ = (w_ - k_) / stride_ + 1;
  argmax_.assign(max_batch * c_ * ho_ * wo_, 0);
  return {c_, ho_, wo_};
}

void MaxPool2d::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                        const StepContext& /*ctx*/) {
  if (n * c_ * ho_ * wo_ > argmax_.size())
    throw Error("MaxPool2d::forward: batch of " + std::to_string(n) +
                " rows exceeds the planned maximum");
  const std::size_t plane_in = h_ * w_, plane_out = ho_ * wo_;
  auto pool_planes = [&](std::size_t begin, std::size_t end) {
    for (std::size_t plane = begin; plane < end; ++plane)  // plane = (i, c)
      pool_plane(x.data() + plane * plane_in, y.data() + plane * plane_out,
                 argmax_.data() + plane * plane_out);
  };
  blas::parallel_ranges(n * c_, kMinPlanesPerThread, pool_planes);
}

void MaxPool2d::pool_plane(const float* xp, float* yp, std::uint32_t* ap) const {
  if (k_ == 2 && stride_ == 2) {
    pool_2x2(xp, yp, ap, w_, ho_, wo_);
    return;
  }
  for (std::size_t oh = 0; oh < ho_; ++oh) {
    for (std::size_t ow = 0; ow < wo_; ++ow) {
      std::uint32_t best = std::uint32_t(oh * stride_ * w_ + ow * stride_);
      float best_value = xp[best];
      for (std::size_t ki = 0; ki < k_; ++ki) {
        const std::size_t row = (oh * stride_ + ki) * w_ + ow * stride_;
        for (std::size_t kj = 0; kj < k_; ++kj)
          scan(xp[row + kj], std::uint32_t(row + kj), best_value, best);
      }
      yp[oh * wo_ + ow] = best_value;
      ap[oh * wo_ + ow] = best;
    }
  }
}

void MaxPool2d::backward(std::span<const float> /*x*/, std::span<const float> /*y*/,
                         std::span<const float> dy, std::span<float> dx, std::size_t n,
                         const StepContext& /*ctx*/) {
  if (dx.empty()) return;
  const std::size_t plane_in = h_ * w_, plane_out = ho_ * wo_;
  auto unpool_planes = [&](std::size_t begin, std::size_t end) {
    for (std::size_t plane = begin; plane < end; ++plane)
      unpool_plane(dy.data() + plane * plane_out, argmax_.data() + plane * plane_out,
                   dx.data() + plane * plane_in);
  };
  blas::parallel_ranges(n * c_, kMinPlanesPerThread, unpool_planes);
}

void MaxPool2d::unpool_plane(const float* dyp, const std::uint32_t* ap, float* dxp) const {
  if (k_ == 2 && stride_ == 2) {
    unpool_2x2(dyp, ap, dxp, h_, w_, ho_, wo_);
    return;
  }
  std::fill_n(dxp, h_ * w_, 0.0f);
  // dx[argmax] += dy (windows may overlap when the stride is below the kernel)
  for (std::size_t q = 0; q < ho_ * wo_; ++q) dxp[ap[q]] += dyp[q];
}

}  // namespace ringtrain
