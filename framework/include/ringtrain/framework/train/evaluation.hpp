// Evaluation on the test set, shared by the ranks: each rank takes a near-equal slice of the
// test set, runs forward in chunks of kEvalChunk samples (no gradients, BatchNorm with its
// running statistics, no dropout), and one allreduce sums the correct counts and loss sums.
// The counts are integers held in doubles, so their sum is exact: the accuracy is the same
// for every N. On regression data (float targets) the metric is the test MSE instead, the mean
// of (ŷ - y)² over every target value (loss.hpp); its sums are doubles added in rank order, so
// it is the same for the same N (and agrees across N to rounding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/sequential.hpp"

namespace ringtrain {

// Samples per forward pass of an evaluation: the model must be planned for at least this.
inline constexpr std::size_t kEvalChunk = 256;

struct Evaluation {
  double accuracy = 0.0;  // correct / test samples (classification)
  double mse = 0.0;       // Σ (ŷ - y)² / (test samples · targets) (regression)
  double loss = 0.0;      // mean per-sample loss: cross-entropy, or (1/k) Σ_k (ŷ_k - y_k)²
};

// The metric a run reports, stops on and records: test accuracy for class labels, test MSE
// for regression targets.
struct Metric {
  const char* key;     // "test_accuracy" | "test_mse": metrics.jsonl and the manifest
  const char* label;   // "test accuracy" | "test MSE": printed lines
  bool higher_better;  // accuracy: a target is reached when >= it; MSE: when <= it
  double of(const Evaluation& e) const { return higher_better ? e.accuracy : e.mse; }
  bool reached(double value, double target) const {
    return higher_better ? value >= target : value <= target;
  }
};
Metric metric_for(bool regression);
// The same metric on the validation split held out of train (--validation-fraction):
// "validation_accuracy" | "validation_mse"; validation false: metric_for(regression).
Metric metric_for(bool regression, bool validation);

// Collective. `seed` keys the model's randomness as in training (unused without dropout).
Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed);

// The same, and every sample's model outputs on every rank: `outputs` (test.size() x the
// model's output width) receives each sample's logits (classes) or values (regression). Each
// rank fills its slice; one more allreduce (floats in doubles, zeros elsewhere: exact) gives
// every rank the whole. On data without y (test.labelled() false) only the outputs are
// computed and the Evaluation stays zero. Collective.
Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed, std::span<float> outputs);

// The index of the largest of `logits`, the first one on ties (the rule accuracy counts with).
std::size_t argmax(std::span<const float> logits);

}  // namespace ringtrain
