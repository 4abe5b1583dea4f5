// Replica check: are the N copies of the model still bitwise the same?
//
// Every rank applies the same update to the same parameters, so replicas can only drift by a
// bug (or a flipped bit). Each rank hashes the bits of its parameters; one MIN/MAX allreduce
// of the hash tells whether all ranks agree (min == max). Only on disagreement do the ranks
// compare per-parameter hashes to name the first parameter that differs. Collective.
#pragma once

#include <cstdint>
#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/parameters.hpp"
#include "ringtrain/framework/sequential.hpp"

namespace ringtrain {

// 64-bit hash of the bit patterns of `values` (not of their numeric values: -0 ≠ +0).
std::uint64_t hash_bits(std::span<const float> values);

// Throws AgreedError on every rank, naming the step and the first differing entry of
// `store`, if the ranks' copies are not bitwise identical. `what` names the store
// ("parameters", "buffers").
void check_replicas(const collectives::Communicator& comm, const ParameterStore& store,
                    const char* what, std::uint64_t step);

// The model's replicas after step `step`: its parameters, and its buffers unless they differ
// by rank by definition (per-rank BatchNorm keeps per-rank running statistics: per_rank_bn).
void check_replicas(const collectives::Communicator& comm, const Sequential& model,
                    bool per_rank_bn, std::uint64_t step);

}  // namespace ringtrain
