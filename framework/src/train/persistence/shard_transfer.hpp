// ShardTransfer: the per-rank part of one asynchronous save on its way to rank 0 without
// stopping training (--zero-gather writer): the ZeRO-1 optimizer shards and the bf16 wire
// residuals, which --zero-gather snapshot gathers with collectives inside the snapshot.
//
// Where it sits in a save (checkpointer.hpp): at the snapshot every rank copies its shard of
// each optimizer state tensor and its residual into one buffer the transfer owns (a memcpy,
// no waiting); a rank other than 0 posts one MPI_Isend of it, rank 0 one MPI_Irecv per other
// rank. Training goes on at once. The messages move while the ranks make their MPI calls for
// the next steps (MPICH progresses every request inside any MPI call); the training thread
// tests the requests at step boundaries and waits for them at the save's end. Once complete,
// rank 0's writer thread assembles the full state from the received buffers (assemble(),
// no MPI) and writes it.
//
//   rank q's message:  [state 0: shard_q | state 1: shard_q | ... | residual: M]
//   shard_q: rank q's pieces end to end in bucket order (OptimizerShard::PieceTable)
//
// Threads: every MPI call here is the training thread's, at a step boundary or inside the
// save, where the training thread makes its other unlocked MPI calls (metrics, save
// agreement): the process stays within MPI_THREAD_SERIALIZED without the ring lock. The
// messages travel on a communicator of their own (duplicated at the first start), so no
// ring or small collective can match them. Only rank 0 ever holds the full state.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/training_state.hpp"

namespace ringtrain {

class ShardTransfer {
 public:
  ShardTransfer() = default;
  // Waits for requests still in flight (see wait()) and frees the communicator.
  ~ShardTransfer();
  ShardTransfer(const ShardTransfer&) = delete;
  ShardTransfer& operator=(const ShardTransfer&) = delete;

  // True if `state` has anything to gather to rank 0 (sharded tensors or a residual).
  static bool needed(const TrainingState& state);

  // Copies this rank's part of `state` and posts its messages. Collective the first time
  // (communicator and piece table), then local. No transfer may be pending.
  void start(const collectives::Communicator& comm, const TrainingState& state);
  // True while messages of the last start() may be in flight.
  bool pending() const { return !requests_.empty(); }
  // Training thread: true once every message has arrived or left (MPI_Testall).
  bool test();
  // Training thread: waits until every message has arrived or left (MPI_Waitall).
  void wait();

  // Rank 0, after test() or wait() said complete; any thread, no MPI: the full optimizer
  // state tensors (in optimizer.state() order, empty unless sharded) and every rank's
  // residual (N x M, empty without one).
  std::vector<FullOptimizerState> assemble() const;
  std::vector<float> residuals() const;

 private:
  void set_up(const collectives::Communicator& comm, const TrainingState& state);  // collective
  void pack(const TrainingState& state, std::vector<float>& into) const;           // local
  std::size_t message_elements(int q) const;  // rank q's message

  MPI_Comm comm_ = MPI_COMM_NULL;  // this transfer's own, duplicated at the first start
  int rank_ = 0, size_ = 1;
  const OptimizerShard* shard_ = nullptr;  // null unless the state is sharded
  std::optional<OptimizerShard::PieceTable> table_;
  std::vector<std::string> state_names_;
  std::size_t residual_elements_ = 0;  // M
  // Rank 0: one buffer per rank (its own included); others: buffers_[0] is the message.
  std::vector<std::vector<float>> buffers_;
  std::vector<MPI_Request> requests_;
};

}  // namespace ringtrain
