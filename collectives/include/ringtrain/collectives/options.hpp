// Options of the ring collectives: which algorithm, what format the data has on the wire, how
// the buffer is cut into messages, how a rank waits, whether sizes are checked, which tag the
// messages carry. Passed by value or
// const reference; the defaults are what the measurements in bench/README-allreduce.md chose.
#pragma once

#include <cstddef>

#include "ringtrain/collectives/wait.hpp"

namespace ringtrain::collectives {

// kMpi runs MPI's own collective (MPI_Allreduce, ...) instead of the ring: for comparison.
// kHierarchical: the two-level allreduce of hierarchical.hpp (allreduce only), which needs
// RingOptions::hierarchy.
enum class Algorithm { kRing, kMpi, kHierarchical };

class Hierarchy;  // hierarchical.hpp

// The format of the ring's messages. kFp32: the floats as they are. kBf16: every segment is
// rounded to bf16 (bf16.hpp) when sent, half the bytes, and added or stored in fp32 on
// arrival; ring_transfer.hpp states what this does to the sums and bounds the error. Only
// the ring implements it (Algorithm::kMpi with kBf16 throws CollectiveError).
enum class Wire { kFp32, kBf16 };

struct RingOptions {
  Algorithm algorithm = Algorithm::kRing;
  Wire wire = Wire::kFp32;
  // Bytes per message. Large enough to use MPICH/UCX's single-copy rendezvous path (> 32 KiB
  // here) and amortise the per-message cost, small enough to pipeline; with 2 in flight the
  // scratch (4 MiB) stays small enough not to evict the data (bench/README-allreduce.md,
  // "Segments").
  std::size_t segment_bytes = 1024 * 1024;
  // Receives posted ahead per step; the reduce-scatter scratch holds two steps' worth:
  // 2 · segments_in_flight · segment_bytes.
  std::size_t segments_in_flight = 2;
  WaitPolicy wait = WaitPolicy::kAuto;
  // Before any data moves, ranks agree that they all pass the same element count (one small
  // collective); a mismatch raises the same CollectiveError on every rank. Skippable on a hot
  // path whose sizes are known to agree.
  bool check_sizes = true;
  // Messages of ring step t carry tag + t (t < 2N-2). Two ring collectives in flight at once
  // on one communicator need tag ranges that do not overlap. The small collectives
  // (small.hpp) use a tag of their own.
  int tag = 0x52494e;
  // Algorithm::kHierarchical: the host grouping, built once by the caller on the same
  // communicator the calls get; it must outlive them. Ignored by the other algorithms.
  const Hierarchy* hierarchy = nullptr;
};

}  // namespace ringtrain::collectives
