// RingPoller: who moves the gradient rings while the main thread computes, and the lock that
// keeps this rank's MPI calls on one thread at a time.
//
// Where it sits in a step: MPI moves data only inside MPI calls (MPICH/UCX run no progress
// thread), so a ring started during backward advances only when this rank polls it. Two
// drivers (PollDriver, the flag --ring-driver):
//   kLayers  the main thread polls: between layers (layer_done), between pieces of long
//            layer work (StepContext::poll), between pieces of the per-bucket optimizer
//            update, and while it waits in finish(). Nothing here runs.
//   kThread  a communication thread polls while buckets are in flight and the main thread
//            computes, sleeping between polls that find nothing (a spinning thread would
//            take the core from backward); the main thread only starts rings and waits.
// With one rank nothing is in flight and no thread is started.
//
// Vocabulary: the MPI lock (mpi_mutex) is held by whoever calls MPI while a step may have
// rings in flight: the main thread, the communication thread, SyncBatchNorm's sums. The
// thread needs MPI_THREAD_SERIALIZED at least.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ringtrain/framework/train/poll_driver.hpp"
#include "train/sum/bucket_rings.hpp"

namespace ringtrain {

class RingPoller {
 public:
  // kThread on more than one rank starts the communication thread, which polls `rings` (it
  // must outlive this object) and sleeps thread_poll_s between fruitless polls. Throws
  // UsageError if MPI was initialised with less than MPI_THREAD_SERIALIZED.
  RingPoller(BucketRings& rings, PollDriver driver, double thread_poll_s, int world_size);
  // Stops and joins the thread.
  ~RingPoller();
  RingPoller(const RingPoller&) = delete;
  RingPoller& operator=(const RingPoller&) = delete;

  std::mutex& mpi_mutex() { return mpi_mutex_; }
  // True if the main thread polls the rings itself (kLayers, or a single rank).
  bool main_thread_polls() const { return !thread_; }

  // The calls below need mpi_mutex held.
  // Rings were started: the thread, asleep while nothing was in flight, wakes.
  void rings_started();
  // The main thread polls itself for a while (true: the thread stays asleep) or goes back to
  // computing (false: the thread takes over).
  void set_main_waiting(bool waiting);

 private:
  struct Thread;
  void thread_main();

  BucketRings& rings_;
  double thread_poll_s_;
  std::mutex mpi_mutex_;
  std::unique_ptr<Thread> thread_;  // kThread, N > 1
};

}  // namespace ringtrain
