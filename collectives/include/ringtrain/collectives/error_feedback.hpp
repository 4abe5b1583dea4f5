// Error feedback for a bf16 wire: what this step's roundings lost is added to the next step's
// gradient, so the compression error does not accumulate over steps.
//
// Where it sits: once per step, around the gradient allreduce on a bf16 wire.
//   feedback.add_to(gradient);                          // x_r = g_r + e_r, e_r <- 0
//   transfer.start(comm, gradient, Collective::kAllreduce, options, feedback.residual());
//   transfer.wait(...);                                 // the ring writes this step's e_r
//
// What it compensates, exactly. In the ring each rank rounds each element at most once
// (ring_transfer.hpp): a partial sum it sends on in reduce-scatter, or its own chunk's full
// sum. It writes what that rounding lost, e_r = p - bf(p), into its residual, and nothing
// else. Following chunk c's chain s_1 = x_{c+1}, s_k = fl32(bf(s_{k-1}) + x_{c+k}), the
// result bf(s_N) is
//   result = Σ_r x_r - Σ_r e_r + A        A: the fp32 rounding of the N-1 additions
// so the residuals of all ranks together are every bf16 loss of the step, the first hop's
// (a rank's own x_r) and the partial sums' alike. Feeding each rank's e_r into its next x_r
// telescopes over K steps (e_r starts at 0; B_k: rounding of the fp32 adds x_r = g_r + e_r):
//   Σ_k result_k = Σ_k Σ_r g_r^k  -  Σ_r e_r^K  +  Σ_k (A_k + B_k)
// Without feedback the middle term is Σ_k Σ_r e_r^k instead: K steps of losses, which add up
// when the gradient changes slowly (a bias) and grow like √K when they do not.
//
// The bound this gives, per element, with u = 2^-8, v = 2^-24, β_N the allreduce bound
// (bf16_allreduce_error_bound, ring_transfer.hpp) and X_k = Σ_r |x_r^k| (every partial sum is
// at most (1+β_N) X_k in magnitude, every loss at most u times what it rounds):
//   |Σ_k result_k - Σ_k Σ_r g_r^k|  <=  N u (1+β_N) X_K  +  Σ_k (2N-1) v (1+β_N) X_k
// one step's bf16 error, plus fp32-level error per step, instead of K steps' bf16 error.
//
// Every bf16 rounding of the wire is compensated; what separates the applied sum from the
// exact one is the last step's losses, still held in the ranks' residuals (a checkpoint must
// save them for a resume to continue the same computation), and fp32-level rounding.
// Residuals differ by rank: each rank keeps its own.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ringtrain::collectives {

class ErrorFeedback {
 public:
  // A residual of `elements` zeros (no loss carried yet).
  explicit ErrorFeedback(std::size_t elements) : residual_(elements, 0.0f) {}

  // gradient += residual[offset, offset + gradient.size()), then that part of the residual
  // <- 0 (the loss has been handed on). Call once per step for each part, before the part's
  // collective. Throws CollectiveError if the part does not fit.
  void add_to(std::span<float> gradient, std::size_t offset = 0);
  // Forgets every loss: for a step whose gradient is thrown away (it took the residual with
  // it; the new losses belong to that gradient).
  void clear();
  // Where the collective writes this step's losses (RingTransfer::start, AsyncAllreduce::start).
  std::span<float> residual() { return residual_; }
  std::span<const float> residual() const { return residual_; }
  // Puts back a saved residual (a checkpoint's). Throws CollectiveError if the size differs.
  void restore(std::span<const float> saved);

 private:
  std::vector<float> residual_;  // (elements): this rank's losses of the last collective
};

}  // namespace ringtrain::collectives
