// Small collectives: a handful of values, where latency is everything. The loss and the
// SyncBatchNorm statistics (sums of doubles), the replica hash check (min/max of a hash),
// the ring's size-agreement check, and a barrier.
//
// They are written on point-to-point messages, like the ring, so that they wait as politely
// (wait.hpp): MPICH's MPI_Allreduce busy-polls and costs milliseconds when ranks outnumber
// cores, which would dwarf a step's worth of tiny messages. Every rank sends its values straight to
// every other rank (an all-gather, N-1 messages each, one latency), then each rank combines the N
// contributions in rank order, so all ranks compute bitwise-identical results, run after run.
// All functions here are collective over `comm` and throw CollectiveError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/wait.hpp"

namespace ringtrain::collectives {

// values[i] <- Σ over ranks r = 0..N-1 of values_r[i], summed in rank order (identical on
// every rank). values.size() must agree across ranks (checked: a mismatch throws everywhere).
void allreduce_sum(const Communicator& comm, std::span<double> values,
                   WaitPolicy wait = WaitPolicy::kAuto);

// values[i] <- max over ranks of values_r[i] (step times: a step lasts as long as its slowest
// rank). values.size() must agree across ranks (checked).
void allreduce_max(const Communicator& comm, std::span<double> values,
                   WaitPolicy wait = WaitPolicy::kAuto);

// min / max of `value` over all ranks.
void allreduce_min_max(const Communicator& comm, std::uint64_t value, std::uint64_t& min,
                       std::uint64_t& max, WaitPolicy wait = WaitPolicy::kAuto);

// Returns once every rank has entered it.
void barrier(const Communicator& comm, WaitPolicy wait = WaitPolicy::kAuto);

// Rank `root` receives every rank's text, in rank order (its own included); the other ranks
// get an empty vector. For data gathered once (trace events at the end of a run), not for a
// hot path: the lengths travel first, then the bytes, one rank after another. Throws if root
// is out of range.
std::vector<std::string> gather_text(const Communicator& comm, const std::string& mine,
                                     int root = 0, WaitPolicy wait = WaitPolicy::kAuto);

// Ranks agree that they all pass `elements`; otherwise every rank throws the same
// CollectiveError naming `operation` and each rank's count. One small collective.
void check_same_size(const Communicator& comm, std::size_t elements, std::string_view operation,
                     WaitPolicy wait = WaitPolicy::kAuto);

}  // namespace ringtrain::collectives
