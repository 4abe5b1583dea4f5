// The two-level allreduce: reduce-scatter within each host, a ring across hosts on each
// rank's piece, all-gather within each host. For many ranks per host and slow links between
// hosts.
//
// Where it sits: the same place as the ring (ring.hpp): after backward, data <- Σ over ranks.
// The flat ring crosses each host's link in every one of its 2(N-1) rounds; here only the
// middle phase crosses hosts, in 2(H-1) rounds, and all L ranks of a host use the link at
// once, each for 1/L of the data. `ringtrain train --collective hierarchical [--ranks-per-host
// K]` runs every gradient bucket's AsyncAllreduce (async.hpp) this way, ZeRO-1's halves too
// (below, "The two halves").
//
// Vocabulary
//   host        a group of ranks: MPI's shared-memory node, or with ranks_per_host K the
//               consecutive ranks [hK, (h+1)K) (one machine can then emulate hosts)
//   H           the number of hosts
//   local l     a rank's index on its host (host order = world rank order)
//   L           the ranks of the smallest host. The buffer is cut into L "host chunks" c_0 ..
//               c_{L-1} (schedule.hpp's partition of M into L)
//   core rank   a rank with l < L; it owns host chunk c_l. Ranks with l >= L (only on a host
//               larger than the smallest) are "extra" ranks: they take part in the
//               intra-host phases only
//   host ring   the ring over the ranks of one host (the host sub-communicator)
//   cross ring  the ring over the core ranks of local index l, one per host, in host order
//               (the cross sub-communicator of l); it reduces c_l
//
// The three phases, each a RingTransfer (ring_transfer.hpp) on a sub-communicator:
//   1 host reduce   a host of L ranks: reduce-scatter of the whole buffer on the host ring,
//                   after which local l holds the host's Σ of c_l. A larger host (P > L
//                   ranks): allreduce on the host ring (every rank holds the host's Σ of all).
//   2 cross         core rank l: ring allreduce of c_l across the H hosts. Extra ranks idle.
//   3 host gather   a host of L ranks: all-gather on the host ring. A larger host: every rank
//                   writes -0.0f over what it does not own (core rank l owns c_l, extra ranks
//                   nothing), then allreduce on the host ring. x + (-0.0f) == x bit for bit for
//                   every float x (+0 included), so each chunk arrives exactly as its owner
//                   holds it.
// The two halves (ZeRO-1 runs them apart, with its update between them):
//   reduce-scatter  phase 1, then phase 2 as the cross ring's reduce-scatter of c_l alone:
//                   core rank l holds the full sum of its "shard", chunk cross_rank of c_l
//                   cut into H (hierarchical_shard below); extra ranks hold none.
//   all-gather      each rank's shard holds its values; phase 2 as the cross ring's
//                   all-gather of c_l, then phase 3: every rank holds every shard.
// The reduce-scatter's shards are bitwise the allreduce's sums there (the same rings' first
// halves), and the all-gather only copies: the two halves around an elementwise update give
// the bits of an allreduce followed by the update everywhere.
// Uneven hosts therefore stay correct and bitwise-replicated; a larger host pays an intra-host
// allreduce instead of a reduce-scatter (and instead of an all-gather), and its extra ranks
// send no inter-host bytes. Example: N = 3, K = 2 gives hosts {0, 1} and {2}, L = 1: ranks 0
// and 2 run the cross ring on the whole buffer, rank 1 only the two host allreduces with 0.
//
// Worked table, N = 4 as 2 hosts x 2 ranks (host A = ranks 0, 1; host B = ranks 2, 3; L = H = 2).
// Host chunk c_l is cut by its cross ring into c_l.0, c_l.1. Each ring's step follows ring.hpp:
//
//                     rank 0 (A,0)  rank 1 (A,1)  rank 2 (B,0)  rank 3 (B,1)
//   phase, ring step   send  recv    send  recv    send  recv    send  recv
//   1 host RS 0         c1    c0      c0    c1      c1    c0      c0    c1   -> l: host Σ of c_l
//   2 cross RS 0       c0.1  c0.0    c1.1  c1.0    c0.0  c0.1    c1.0  c1.1
//   2 cross AG 1       c0.0  c0.1    c1.0  c1.1    c0.1  c0.0    c1.1  c1.0   -> l: Σ of c_l
//   3 host AG 1         c0    c1      c1    c0      c0    c1      c1    c0   -> all: Σ of all
//   shard (RS alone)      c0.0          c1.0          c0.1          c1.1
//
// Only phase 2 crosses hosts (ranks 0 <-> 2 and 1 <-> 3, both at once). The summation order of
// every element is fixed by the layout (host sums in the host ring's order, then host sums in
// the cross ring's order), so repeated calls are bitwise identical and every rank ends with
// the same bits; the order differs from the flat ring's, so the result agrees with it to
// rounding, not bitwise.
//
// Cost model. Hosts of L ranks, M bytes, α and B per level: α_intra and B_intra of a host
// ring, α_inter the latency of a round across hosts, B_inter the bandwidth one rank gets
// across hosts while all L ranks of its host send at once (B_link / L for one shared link).
//   phase 1: L-1 rounds, each rank sends (L-1)/L · M         (L-1) α_intra + (L-1)/L · M / B_intra
//   phase 2: 2(H-1) rounds on M/L bytes, each rank sends 2(H-1)/H · M/L
//                                                            2(H-1) α_inter + 2(H-1)/H · (M/L) / B_inter
//   phase 3: as phase 1
//   t(M) = 2(L-1) α_intra + 2(L-1)/L · M / B_intra + 2(H-1) α_inter + 2(H-1)/H · (M/L) / B_inter
// A host's link carries L · 2(H-1)/H · M/L = 2(H-1)/H · M each way, against 2(N-1)/N · M for
// the flat ring (whose 2(N-1) rounds each also wait on the slowest link). Bytes sent per core
// rank: intra 2(L-1)/L · M, inter 2(H-1)/H · M/L (exactly: hierarchical_counters below).
//
// Counters (schedule.hpp): rounds and bytes of all three phases (a half: its phases);
// inter_host_rounds and inter_host_bytes_sent those of phase 2 alone.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <optional>
#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/ring_transfer.hpp"
#include "ringtrain/collectives/schedule.hpp"

namespace ringtrain::collectives {

// Where one rank sits in the two-level layout.
struct HostLayout {
  int hosts = 1;        // H
  int host_chunks = 1;  // L: ranks of the smallest host
  int host_size = 1;    // P: ranks of this rank's host (>= L)
  int local = 0;        // l: this rank's index on its host
  int cross_rank = -1;  // index in the cross ring of l (its host's index); -1 on an extra rank
  bool core() const { return local < host_chunks; }
};

// The host and cross sub-communicators, created once (collective) and freed on destruction.
// Not copyable or movable (communicators hold raw handles); destroy before MPI_Finalize.
class Hierarchy {
 public:
  // Collective over `world`. ranks_per_host 0: hosts are MPI's shared-memory nodes; K > 0:
  // ranks [hK, (h+1)K) form host h (the last host may be smaller). Throws CollectiveError
  // for K < 0 or a failed MPI call.
  explicit Hierarchy(const Communicator& world, int ranks_per_host = 0);
  ~Hierarchy();
  Hierarchy(const Hierarchy&) = delete;
  Hierarchy& operator=(const Hierarchy&) = delete;

  const HostLayout& layout() const { return layout_; }
  const Communicator& host() const { return *host_; }
  // The cross ring of this rank's local index; nullptr on an extra rank.
  const Communicator* cross() const { return cross_ ? &*cross_ : nullptr; }
  // The communicator the hierarchy was built on: calls must pass the same one.
  MPI_Comm world_handle() const { return world_; }

 private:
  MPI_Comm world_;
  MPI_Comm host_comm_ = MPI_COMM_NULL, cross_comm_ = MPI_COMM_NULL;
  std::optional<Communicator> host_, cross_;
  HostLayout layout_;
};

// The exact counters of a hierarchical `which` of M floats on a rank at `layout`: its
// phases' ring counters (schedule.hpp's expected_counters; an allreduce all three, a
// reduce-scatter phases 1 and 2, an all-gather 2 and 3), phase 2 also as inter-host ones.
Counters hierarchical_counters(std::size_t M, const HostLayout& layout,
                               Collective which = Collective::kAllreduce);

// Elements [begin, begin + size) of a buffer.
struct ChunkRange {
  std::size_t begin = 0, size = 0;
};

// The shard of M floats that a hierarchical reduce-scatter leaves fully summed on a rank at
// `layout` ("The two halves"): a core rank (host index h = cross_rank, local l) gets chunk h
// of host chunk c_l cut into H,
//   begin = chunk_begin(M, L, l) + chunk_begin(|c_l|, H, h),  size = chunk_size(|c_l|, H, h)
// (with H = 1 all of c_l); an extra rank gets none (size 0). The shards of all ranks
// partition [0, M).
ChunkRange hierarchical_shard(std::size_t M, const HostLayout& layout);

// The hierarchy a call with Algorithm::kHierarchical runs on: options.hierarchy, checked to
// be set and built on `comm`. Throws CollectiveError otherwise.
const Hierarchy& checked_hierarchy(const Communicator& comm, const RingOptions& options);

class HierarchicalTransfer;

// data <- Σ over ranks of data, blocking, on a transfer the caller keeps (its buffers are
// reused): options.check_sizes's agreement, checked_hierarchy, then the three phases.
// Collective; throws CollectiveError as those do.
Counters hierarchical_allreduce(HierarchicalTransfer& transfer, const Communicator& comm,
                                std::span<float> data, const RingOptions& options);

// One hierarchical allreduce in progress: the three phases as a state machine over one
// reusable RingTransfer (its buffers grow once and are reused). Used by AsyncAllreduce and
// allreduce_sum with Algorithm::kHierarchical; interface as RingTransfer's.
class HierarchicalTransfer {
 public:
  HierarchicalTransfer() = default;
  // An unfinished transfer is completed (blocking). Never throws.
  ~HierarchicalTransfer();
  HierarchicalTransfer(const HierarchicalTransfer&) = delete;
  HierarchicalTransfer& operator=(const HierarchicalTransfer&) = delete;

  // Begins data <- Σ over the ranks of the hierarchy's world, in place, or one half of it
  // (`which`, "The two halves": a reduce-scatter leaves the sum on this rank's shard alone,
  // an all-gather spreads every rank's shard). Collective: every rank starts the same `which`
  // with the same data.size() and options; `hierarchy` and `data` must outlive
  // the transfer. Each phase's ring uses options.tag on its own sub-communicator. With
  // options.wire = Wire::kBf16 only the cross-host ring rounds to bf16 (the link is the slow
  // part; inside the host the sums stay fp32), and `residual` (empty or data.size() floats)
  // receives this rank's rounding losses there, as RingTransfer::start says; the rest of it
  // is left untouched. Throws CollectiveError if still active or options are invalid.
  void start(const Hierarchy& hierarchy, std::span<float> data, const RingOptions& options,
             std::span<float> residual = {}, Collective which = Collective::kAllreduce);
  // Polls without blocking, moving on to the next phase when one ends; true once complete.
  bool progress();
  // Blocks until complete; this rank's counters.
  Counters wait(WaitPolicy policy);

  bool active() const { return phase_ != Phase::kDone; }
  // True once this rank's piece of the sum is final: a core rank's own chunk of its cross
  // ring, its shard (the host ring's own chunk when H = 1); an extra rank has none, and it
  // is true once phase 2 is reached. True when idle and for an all-gather.
  bool own_chunk_reduced() const;
  // True if this rank's final piece (above) holds a NaN or ±inf; the pieces of all ranks
  // cover the buffer. Valid once own_chunk_reduced().
  bool sum_not_finite() const;
  std::size_t events() const { return events_ + (ran_ ? ring_.events() : 0); }
  const Counters& counters() const { return counters_; }

 private:
  enum class Phase { kHostReduce, kCross, kHostGather, kDone };
  void enter(Phase phase);        // starts the phase's ring (or skips it); kDone if it throws
  void start_phase(Phase phase);  // enter's work
  void settle();            // while the current phase is finished, account it and move on
  bool final_phase(Phase phase) const;  // the phase whose own chunk is the full sum
  Phase next_phase() const;             // after phase_, for which_

  const Hierarchy* hierarchy_ = nullptr;
  std::span<float> data_;
  std::span<float> residual_;  // bf16 wire: this rank's losses of the cross-host ring
  RingOptions options_;
  Collective which_ = Collective::kAllreduce;
  Phase phase_ = Phase::kDone;
  bool ran_ = false;  // the current phase started ring_
  RingTransfer ring_;
  Counters counters_;
  std::size_t events_ = 0;
  bool not_finite_ = false;
};

}  // namespace ringtrain::collectives
