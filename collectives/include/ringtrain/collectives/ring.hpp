// The ring: reduce-scatter then all-gather, written on MPI point-to-point messages.
//
// Where it sits: after backward, every rank holds its own gradient g_r (M floats). The
// optimizer needs Σ_r g_r on every rank. The ring produces it with every rank sending and
// receiving the same amount, whatever N is, so the per-rank cost does not grow with N.
//
// Vocabulary
//   chunk    the buffer is cut into N near-equal chunks (schedule.hpp: sizes differ by at
//            most one element, larger first); chunk i ends up reduced on rank i
//   round    every rank sends one chunk to its right neighbour and receives one from its left
//   phase    reduce-scatter (N-1 rounds, received chunks are *added*) then all-gather (N-1
//            rounds, received chunks *overwrite*); rounds of both are numbered as steps
//   segment  a chunk travels as messages of at most segment_bytes; segments pipeline: the
//            segment received in step t is forwarded in step t+1 as soon as it has been added,
//            without waiting for the rest of its chunk (each step has its own message tag, so
//            the end of reduce-scatter and the start of all-gather overlap too)
//
// Worked transfer table, N = 4. Step t: rank r sends chunk (r-t-1) mod 4 to r+1 and receives
// chunk (r-t-2) mod 4 from r-1.
//
//               rank 0      rank 1      rank 2      rank 3
//   step       send recv   send recv   send recv   send recv
//   RS 0 (t=0)   3    2      0    3      1    0      2    1
//   RS 1 (t=1)   2    1      3    2      0    3      1    0
//   RS 2 (t=2)   1    0      2    1      3    2      0    3   -> rank r holds Σ of chunk r
//   AG 0 (t=3)   0    3      1    0      2    1      3    2
//   AG 1 (t=4)   3    2      0    3      1    0      2    1
//   AG 2 (t=5)   2    1      3    2      0    3      1    0   -> every rank holds Σ of all
//
// Chunk 0, for example: rank 1 sends its chunk 0 (x1) to rank 2, which adds (x1+x2); rank 3
// adds x3; rank 0 adds x0 and owns ((x1+x2)+x3)+x0, then passes it on, unchanged, to 1, 2, 3. The
// summation order is fixed by (N, chunk), so repeated calls are bitwise identical and every
// rank ends with the same bits.
//
// Cost model. Each rank sends and receives (N-1) chunks of M/N per phase:
//   bytes sent per rank  = 2 (N-1)/N · M_bytes
//   t(M) = 2(N-1) α + 2(N-1)/N · M_bytes / B
// α is the per-round latency, B the per-rank bandwidth; cost_model.hpp fits both. "busbw" =
// algbw · 2(N-1)/N is the B that the measurement implies if α were zero.
//
// Waiting: a rank with nothing to do polls MPI and, between polls, spins or yields its core
// (wait.hpp), depending on whether ranks outnumber cores.
//
// Buffers: a segment received in a reduce-scatter round lands in scratch and is added into
// the caller's span; an all-gather segment is received straight into the span. The scratch
// and request slots belong to a RingTransfer (ring_transfer.hpp), planned once and reused.
//
// The calls below work in place on std::span<float>, for any N >= 1 and any element count
// M >= 0, and are *collective*: every rank of `comm` calls them in the same order with the
// same M and options. Errors (CollectiveError): ranks passing different M (with
// options.check_sizes, the default: every rank throws the same message before any data
// moves), a failed MPI call, invalid options. Counters are this rank's payload traffic for
// the call; with Algorithm::kMpi they are zero (MPI does not report its traffic). A call
// without a RingTransfer argument uses a fresh one (its scratch is allocated per call).
// Algorithm::kHierarchical runs the two-level allreduce of hierarchical.hpp, or one of its
// halves, on RingOptions::hierarchy; its reduce-scatter leaves each rank's sum on the rank's
// hierarchical_shard, not on chunk `rank`.
#pragma once

#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/ring_transfer.hpp"
#include "ringtrain/collectives/schedule.hpp"
#include "ringtrain/collectives/small.hpp"  // the double / min-max sums a step also needs

namespace ringtrain::collectives {

// data <- Σ over ranks of data. Collective, in place.
Counters allreduce_sum(const Communicator& comm, std::span<float> data,
                       const RingOptions& options = {});
// On return rank r's chunk r (chunk_begin/chunk_size(M, N, r)) holds Σ over ranks of that
// chunk; the other chunks hold unspecified partial sums. Collective, in place.
Counters reduce_scatter_sum(const Communicator& comm, std::span<float> data,
                            const RingOptions& options = {});
// Rank r contributes its chunk r; on return every rank holds every rank's chunk. Collective,
// in place.
Counters all_gather(const Communicator& comm, std::span<float> data,
                    const RingOptions& options = {});

// The same three with a reusable transfer (its buffers are planned once, then reused).
// `which` selects the collective.
Counters run_collective(RingTransfer& transfer, const Communicator& comm, std::span<float> data,
                        Collective which, const RingOptions& options = {});

// data <- root's data, on every rank. Pipelined down the ring (root -> root+1 -> ...) in
// segments of options.segment_bytes. Collective, in place. Throws if root is out of range.
void broadcast(const Communicator& comm, std::span<float> data, int root,
               const RingOptions& options = {});

}  // namespace ringtrain::collectives
