// The ring's pure schedule: how M elements are cut into N chunks, which chunk each rank sends
// and receives in each round, how a chunk is cut into segments, and the exact traffic that
// follows. No MPI here: everything is a function of (M, N, rank, step), tested exhaustively.
//
// Vocabulary (see ring.hpp for the whole essay):
//   chunk    one of N near-equal slices of the M-element buffer; chunk i "belongs" to rank i
//   round    one ring step: every rank sends one chunk to its right neighbour and receives
//            one chunk from its left neighbour; N-1 rounds per phase
//   step     rounds of both phases numbered together: steps 0..N-2 are the reduce-scatter
//            rounds, steps N-1..2N-3 the all-gather rounds
//   segment  a slice of at most segment_elements of one chunk; the unit of one MPI message
#pragma once

#include <cstddef>

namespace ringtrain::collectives {

// Traffic of one collective call on this rank. Only payload is counted (float data moved by
// the ring), not the size-agreement check or MPI's own protocol messages.
struct Counters {
  std::size_t rounds = 0;          // ring rounds executed (N-1 per phase; 0 when M = 0 or N = 1)
  std::size_t bytes_sent = 0;      // payload bytes this rank sent
  std::size_t bytes_received = 0;  // payload bytes this rank received
  // Of the above, what crossed between hosts: set by the hierarchical allreduce
  // (hierarchical.hpp) alone; 0 for the flat ring, which does not know where ranks sit.
  std::size_t inter_host_rounds = 0;
  std::size_t inter_host_bytes_sent = 0;
  bool operator==(const Counters&) const = default;
};

// --- chunk partition ------------------------------------------------------------------------
// Chunk i of M elements over N ranks. Sizes differ by at most one, the larger chunks first:
//   M = 10, N = 4:  sizes 3 3 2 2,  begins 0 3 6 8
//   M =  2, N = 4:  sizes 1 1 0 0,  begins 0 1 2 2      (M < N: empty chunks at the end)
// Requires N >= 1 and i < N.
std::size_t chunk_size(std::size_t M, std::size_t N, std::size_t i);
std::size_t chunk_begin(std::size_t M, std::size_t N, std::size_t i);

// --- neighbours and rounds ------------------------------------------------------------------
// Data flows to the right: rank r sends to (r+1) mod N and receives from (r-1) mod N.
int ring_right(int rank, int N);
int ring_left(int rank, int N);

// Which collective a call runs: a contiguous range of steps.
//   reduce-scatter: steps 0 .. N-2      (afterwards rank r holds the full sum of chunk r)
//   all-gather:     steps N-1 .. 2N-3   (rank r starts with chunk r, ends with all)
//   allreduce:      steps 0 .. 2N-3
enum class Collective { kReduceScatter, kAllGather, kAllreduce };
int first_step(Collective which, int N);
int num_steps(Collective which, int N);
// True for steps whose received segment is added into the buffer (reduce-scatter rounds);
// false for steps whose received segment overwrites it (all-gather rounds).
bool step_reduces(int step, int N);

// The chunk rank `rank` sends at `step`, and the one it receives. One formula serves both
// phases:   send = (rank - step - 1) mod N,   recv = (rank - step - 2) mod N
// so the chunk received at step t is the chunk sent at step t+1, and what rank r receives at
// step t is what its left neighbour sends at step t.
std::size_t send_chunk(int rank, int step, int N);
std::size_t recv_chunk(int rank, int step, int N);

// --- segments -------------------------------------------------------------------------------
// Elements per segment for a segment size in bytes (at least one element).
std::size_t segment_elements(std::size_t segment_bytes);
// Segments of a chunk of `elements` (0 for an empty chunk: nothing is sent for it).
std::size_t num_segments(std::size_t elements, std::size_t segment_elements);

// --- accounting -----------------------------------------------------------------------------
// The exact counters a ring call must report on `rank`. For the allreduce with N dividing M:
// rounds = 2(N-1), bytes_sent = bytes_received = 2 * M * (N-1)/N * sizeof(float).
Counters expected_counters(Collective which, std::size_t M, int N, int rank);

}  // namespace ringtrain::collectives
