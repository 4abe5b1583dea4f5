// The two-level allreduce (hierarchical.hpp has the essay): the host grouping with its
// sub-communicators, the exact counters, and the three-phase state machine.
#include "ringtrain/collectives/hierarchical.hpp"

#include <algorithm>
#include <string>

#include "ringtrain/collectives/small.hpp"

namespace ringtrain::collectives {

namespace {

int int_allreduce(int value, MPI_Op op, MPI_Comm comm) {
  int result = 0;
  check_mpi(MPI_Allreduce(&value, &result, 1, MPI_INT, op, comm), "MPI_Allreduce(hierarchy)");
  return result;
}

// Host phases: a host of exactly L ranks runs the two halves of one ring; a larger host runs
// two allreduces (hierarchical.hpp, "The three phases").
Collective host_collective(const HostLayout& layout, bool reduce) {
  if (layout.host_size > layout.host_chunks) return Collective::kAllreduce;
  return reduce ? Collective::kReduceScatter : Collective::kAllGather;
}

void add(Counters& total, const Counters& part) {
  total.rounds += part.rounds;
  total.bytes_sent += part.bytes_sent;
  total.bytes_received += part.bytes_received;
  total.inter_host_rounds += part.inter_host_rounds;
  total.inter_host_bytes_sent += part.inter_host_bytes_sent;
}

}  // namespace

Hierarchy::Hierarchy(const Communicator& world, int ranks_per_host) : world_(world.handle()) {
  if (ranks_per_host < 0)
    throw CollectiveError("ranks per host must be >= 0 (0: MPI's shared-memory nodes), got " +
                          std::to_string(ranks_per_host));
  if (ranks_per_host == 0)
    check_mpi(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL,
                                  &host_comm_),
              "MPI_Comm_split_type(host)");
  else
    check_mpi(MPI_Comm_split(world_, world.rank() / ranks_per_host, world.rank(), &host_comm_),
              "MPI_Comm_split(host)");
  host_.emplace(host_comm_);
  layout_.host_size = host_->size();
  layout_.local = host_->rank();
  layout_.hosts = int_allreduce(layout_.local == 0 ? 1 : 0, MPI_SUM, world_);
  layout_.host_chunks = int_allreduce(layout_.host_size, MPI_MIN, world_);
  // Core ranks of local index l form cross ring l, ordered by world rank (= host order).
  const int color = layout_.core() ? layout_.local : MPI_UNDEFINED;
  check_mpi(MPI_Comm_split(world_, color, world.rank(), &cross_comm_), "MPI_Comm_split(cross)");
  if (cross_comm_ != MPI_COMM_NULL) {
    cross_.emplace(cross_comm_);
    layout_.cross_rank = cross_->rank();
  }
}

Hierarchy::~Hierarchy() {
  // The Communicators borrow the handles: drop them first, then free.
  cross_.reset();
  host_.reset();
  if (cross_comm_ != MPI_COMM_NULL) MPI_Comm_free(&cross_comm_);
  if (host_comm_ != MPI_COMM_NULL) MPI_Comm_free(&host_comm_);
}

Counters hierarchical_counters(std::size_t M, const HostLayout& layout, Collective which) {
  const auto L = static_cast<std::size_t>(layout.host_chunks);
  Counters total;
  if (which != Collective::kAllGather)
    add(total, expected_counters(host_collective(layout, true), M, layout.host_size, layout.local));
  if (layout.core()) {
    const std::size_t chunk = chunk_size(M, L, static_cast<std::size_t>(layout.local));
    Counters cross = expected_counters(which, chunk, layout.hosts, layout.cross_rank);
    cross.inter_host_rounds = cross.rounds;
    cross.inter_host_bytes_sent = cross.bytes_sent;
    add(total, cross);
  }
  if (which != Collective::kReduceScatter)
    add(total,
        expected_counters(host_collective(layout, false), M, layout.host_size, layout.local));
  return total;
}

ChunkRange hierarchical_shard(std::size_t M, const HostLayout& layout) {
  if (!layout.core()) return {};
  const auto l = static_cast<std::size_t>(layout.local);
  const auto L = static_cast<std::size_t>(layout.host_chunks);
  const auto H = static_cast<std::size_t>(layout.hosts);
  const auto h = static_cast<std::size_t>(layout.cross_rank);
  const std::size_t host_chunk = chunk_size(M, L, l);
  return {chunk_begin(M, L, l) + chunk_begin(host_chunk, H, h), chunk_size(host_chunk, H, h)};
}

const Hierarchy& checked_hierarchy(const Communicator& comm, const RingOptions& options) {
  const std::string rank = "rank " + std::to_string(comm.rank()) + ": ";
  if (options.hierarchy == nullptr)
    throw CollectiveError(rank + "Algorithm::kHierarchical needs RingOptions::hierarchy");
  if (options.hierarchy->world_handle() != comm.handle())
    throw CollectiveError(rank + "RingOptions::hierarchy was built on another communicator");
  return *options.hierarchy;
}

Counters hierarchical_allreduce(HierarchicalTransfer& transfer, const Communicator& comm,
                                std::span<float> data, const RingOptions& options) {
  if (options.check_sizes) check_same_size(comm, data.size(), "allreduce_sum", options.wait);
  transfer.start(checked_hierarchy(comm, options), data, options);
  return transfer.wait(options.wait);
}

HierarchicalTransfer::~HierarchicalTransfer() {
  try {
    if (active()) wait(WaitPolicy::kSpin);
  } catch (...) {
    // An MPI failure while cleaning up: nothing sensible is left to do in a destructor.
  }
  phase_ = Phase::kDone;
}

void HierarchicalTransfer::start(const Hierarchy& hierarchy, std::span<float> data,
                                 const RingOptions& options, std::span<float> residual,
                                 Collective which) {
  if (active())
    throw CollectiveError("rank " + std::to_string(hierarchy.host().rank()) +
                          ": HierarchicalTransfer::start while a previous transfer is active");
  if (!residual.empty() && residual.size() != data.size())
    throw CollectiveError("rank " + std::to_string(hierarchy.host().rank()) + ": residual has " +
                          std::to_string(residual.size()) + " elements, data " +
                          std::to_string(data.size()));
  hierarchy_ = &hierarchy;
  data_ = data;
  residual_ = residual;
  options_ = options;
  which_ = which;
  counters_ = Counters{};
  events_ = 0;
  not_finite_ = false;
  enter(which == Collective::kAllGather ? Phase::kCross : Phase::kHostReduce);
  settle();
}

// A phase that fails to start (invalid options, a failed MPI call) ends the transfer: no
// later phase may start from a destructor on a half-done sum.
void HierarchicalTransfer::enter(Phase phase) {
  try {
    start_phase(phase);
  } catch (...) {
    phase_ = Phase::kDone;
    throw;
  }
}

void HierarchicalTransfer::start_phase(Phase phase) {
  phase_ = phase;
  ran_ = false;
  const HostLayout& layout = hierarchy_->layout();
  const auto L = static_cast<std::size_t>(layout.host_chunks);
  const auto l = static_cast<std::size_t>(layout.local);
  RingOptions inside = options_;  // within the host the sums stay fp32
  inside.wire = Wire::kFp32;
  switch (phase) {
    case Phase::kHostReduce:
      ring_.start(hierarchy_->host(), data_, host_collective(layout, true), inside);
      ran_ = true;
      break;
    case Phase::kCross: {
      if (!layout.core()) break;  // an extra rank has no host chunk
      const std::size_t begin = chunk_begin(data_.size(), L, l);
      const std::size_t size = chunk_size(data_.size(), L, l);
      ring_.start(*hierarchy_->cross(), data_.subspan(begin, size), which_, options_,
                  residual_.empty() ? residual_ : residual_.subspan(begin, size));
      ran_ = true;
      break;
    }
    case Phase::kHostGather:
      if (layout.host_size > layout.host_chunks) {
        // Allreduce as a gather: -0.0f over what this rank does not own adds nothing.
        const std::size_t begin = layout.core() ? chunk_begin(data_.size(), L, l) : 0;
        const std::size_t size = layout.core() ? chunk_size(data_.size(), L, l) : 0;
        std::fill(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(begin), -0.0f);
        std::fill(data_.begin() + static_cast<std::ptrdiff_t>(begin + size), data_.end(), -0.0f);
      }
      ring_.start(hierarchy_->host(), data_, host_collective(layout, false), inside);
      ran_ = true;
      break;
    case Phase::kDone: break;
  }
}

// A reduce-scatter ends after the cross ring; an all-gather began there.
HierarchicalTransfer::Phase HierarchicalTransfer::next_phase() const {
  if (phase_ == Phase::kCross && which_ == Collective::kReduceScatter) return Phase::kDone;
  return static_cast<Phase>(static_cast<int>(phase_) + 1);
}

bool HierarchicalTransfer::final_phase(Phase phase) const {
  return hierarchy_->layout().hosts == 1 ? phase == Phase::kHostReduce : phase == Phase::kCross;
}

void HierarchicalTransfer::settle() {
  while (phase_ != Phase::kDone && !(ran_ && ring_.active())) {
    if (ran_) {
      Counters part = ring_.counters();
      if (phase_ == Phase::kCross) {
        part.inter_host_rounds = part.rounds;
        part.inter_host_bytes_sent = part.bytes_sent;
      }
      add(counters_, part);
      events_ += ring_.events();
      if (final_phase(phase_)) not_finite_ = ring_.sum_not_finite();
    }
    enter(next_phase());
  }
}

bool HierarchicalTransfer::progress() {
  if (!active()) return true;
  ring_.progress();
  settle();
  return !active();
}

Counters HierarchicalTransfer::wait(WaitPolicy policy) {
  while (active()) {
    ring_.wait(policy);
    settle();
  }
  return counters_;
}

bool HierarchicalTransfer::own_chunk_reduced() const {
  if (!active() || phase_ > Phase::kCross) return true;
  if (phase_ == Phase::kHostReduce) return false;
  // Phase 2 (with H = 1 it is skipped at once, so this is H > 1): a core rank's cross ring.
  return !ran_ || ring_.own_chunk_reduced();
}

bool HierarchicalTransfer::sum_not_finite() const {
  if (active() && final_phase(phase_) && ran_) return ring_.sum_not_finite();
  return not_finite_;
}

}  // namespace ringtrain::collectives
