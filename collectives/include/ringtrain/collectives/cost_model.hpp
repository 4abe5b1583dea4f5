// The α-β cost model of the ring and its fit to measurements. Pure: no MPI.
//
//   t(M) = 2(N-1) α + 2(N-1)/N · M / B          M in bytes, N ranks
//
// α is the fixed cost of one round (latency, matching, wake-up), B the bandwidth of one rank
// (bytes per second). Fitting minimises the *relative* error Σ ((t_model - t)/t)², so 4-byte
// and 64 MiB points weigh the same. A transport that changes protocol at some size (MPICH/UCX
// switch from eager to rendezvous near 32 KiB here), or data that stops fitting in cache, is
// not one α-B pair: fit_cost_model then cuts the sizes into regimes, fits each, and says so.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::collectives {

struct Sample {
  double bytes = 0;    // M, the buffer size
  double seconds = 0;  // measured time of one allreduce (> 0)
};

struct AlphaBeta {
  double alpha_s = 0;                                               // per round
  double bandwidth_Bps = std::numeric_limits<double>::infinity();  // per rank
};

// The model's time for M bytes at N ranks.
double predict_seconds(const AlphaBeta& model, int N, double bytes);

// Least squares on relative error, with α >= 0 and B > 0 (a parameter that would come out
// negative is pinned at its bound and the other refitted). Requires N >= 2 and >= 1 sample.
AlphaBeta fit_alpha_beta(std::span<const Sample> samples, int N);

struct Regime {
  double from_bytes = 0, to_bytes = 0;  // inclusive range of sample sizes it covers
  AlphaBeta model;
};

struct CostFit {
  AlphaBeta single;              // one pair for every size
  std::vector<Regime> regimes;   // one, or more when one pair cannot explain all sizes
  std::vector<double> predicted_s;  // per sample, from its regime's model
  std::vector<double> residuals;    // per sample: (predicted - measured) / measured
  double single_max_residual = 0;   // max |residual| of the single fit
  bool split = false;
  std::string note;  // one human sentence: what was fitted and why
};

// Fits the single model; if its largest relative residual exceeds `split_threshold`, cuts
// the size-sorted samples into up to `max_regimes` runs of >= 3 samples (the best cut for
// each count), taking one more regime only while that at least halves the squared error.
// Samples may come in any order; outputs follow the input order. N = 1 (nothing to model)
// gives an empty fit with a note.
CostFit fit_cost_model(std::span<const Sample> samples, int N, double split_threshold = 0.25,
                       std::size_t max_regimes = 3);

}  // namespace ringtrain::collectives
