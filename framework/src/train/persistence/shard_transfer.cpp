// The shards of an asynchronous save sent to rank 0 while training goes on (see
// shard_transfer.hpp).
#include "train/persistence/shard_transfer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <span>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

ShardTransfer::~ShardTransfer() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // A save left in flight by an exception: its messages are matched already (every rank
  // posted its half at the snapshot), so waiting ends as soon as the peers make any MPI
  // call, which they do before they could leave the job.
  if (pending())
    MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

bool ShardTransfer::needed(const TrainingState& state) {
  return sharded(state) || (state.feedback != nullptr && !state.feedback->residual().empty());
}

void ShardTransfer::set_up(const collectives::Communicator& comm, const TrainingState& state) {
  collectives::check_mpi(MPI_Comm_dup(comm.handle(), &comm_), "MPI_Comm_dup(checkpoint shards)");
  rank_ = comm.rank();
  size_ = comm.size();
  if (sharded(state)) {
    shard_ = state.shard;
    table_ = shard_->piece_table(comm);
    for (const OptimizerStateView& view : state.optimizer.state())
      state_names_.push_back(view.name);
  }
  residual_elements_ = state.feedback == nullptr ? 0 : state.feedback->residual().size();
  buffers_.resize(rank_ == 0 ? static_cast<std::size_t>(size_) : 1);
  for (int q = 0; q < size_; ++q) {
    if (message_elements(q) > static_cast<std::size_t>(INT_MAX))
      throw Error(
          fmt::format("checkpoint shards: rank {} would send {} floats, more than one "
                      "MPI message counts; use --zero-gather snapshot",
                      q, message_elements(q)));
    if (rank_ == 0 || q == rank_)
      buffers_[rank_ == 0 ? std::size_t(q) : 0].resize(message_elements(q));
  }
}

std::size_t ShardTransfer::message_elements(int q) const {
  const std::size_t shard = shard_ ? shard_->shard_elements(*table_, q, size_) : 0;
  return state_names_.size() * shard + residual_elements_;
}

// into: [state 0's shard | state 1's shard | ... | residual], as the header draws it.
void ShardTransfer::pack(const TrainingState& state, std::vector<float>& into) const {
  auto out = into.begin();
  if (shard_)
    for (const OptimizerStateView& view : state.optimizer.state())
      out = std::copy(view.values.begin(), view.values.end(), out);
  if (residual_elements_ > 0) {
    const std::span<const float> residual = state.feedback->residual();
    out = std::copy(residual.begin(), residual.end(), out);
  }
  if (out != into.end())
    throw Error(fmt::format("checkpoint shards: packed {} of {} floats on rank {}",
                            out - into.begin(), into.size(), rank_));
}

void ShardTransfer::start(const collectives::Communicator& comm, const TrainingState& state) {
  if (pending()) throw Error("ShardTransfer::start with a transfer in flight");
  if (comm_ == MPI_COMM_NULL) set_up(comm, state);
  if (rank_ != 0) {
    pack(state, buffers_[0]);
    requests_.resize(1);
    collectives::check_mpi(MPI_Isend(buffers_[0].data(), static_cast<int>(buffers_[0].size()),
                                     MPI_FLOAT, 0, 0, comm_, &requests_[0]),
                           "MPI_Isend(checkpoint shards)");
    return;
  }
  pack(state, buffers_[0]);
  for (int q = 1; q < size_; ++q) {
    std::vector<float>& from_q = buffers_[std::size_t(q)];
    requests_.emplace_back();
    collectives::check_mpi(MPI_Irecv(from_q.data(), static_cast<int>(from_q.size()), MPI_FLOAT, q,
                                     0, comm_, &requests_.back()),
                           "MPI_Irecv(checkpoint shards)");
  }
}

bool ShardTransfer::test() {
  if (!pending()) return true;
  int done = 0;
  collectives::check_mpi(
      MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall(checkpoint shards)");
  if (done) requests_.clear();
  return done != 0;
}

void ShardTransfer::wait() {
  if (!pending()) return;
  collectives::check_mpi(
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
      "MPI_Waitall(checkpoint shards)");
  requests_.clear();
}

std::vector<FullOptimizerState> ShardTransfer::assemble() const {
  std::vector<FullOptimizerState> full;
  for (std::size_t v = 0; v < state_names_.size(); ++v) {
    full.push_back({state_names_[v], std::vector<float>(shard_->total_elements())});
    for (int q = 0; q < size_; ++q) {
      const std::size_t E = shard_->shard_elements(*table_, q, size_);
      const std::span<const float> message(buffers_[std::size_t(q)]);
      shard_->place_rank(*table_, q, size_, message.subspan(v * E, E), full.back().values);
    }
  }
  return full;
}

std::vector<float> ShardTransfer::residuals() const {
  std::vector<float> all;
  if (residual_elements_ == 0) return all;
  all.reserve(residual_elements_ * std::size_t(size_));
  for (const std::vector<float>& message : buffers_)
    all.insert(all.end(), message.end() - std::ptrdiff_t(residual_elements_), message.end());
  return all;
}

}  // namespace ringtrain
