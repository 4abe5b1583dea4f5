// The process's MPI as the module owns it, and the few process-wide settings every binding
// shares.
//
// MPI (MPICH) is initialised on first use (MPI_THREAD_SERIALIZED, as the ringtrain program
// does) by whichever binding needs it first, and finalised when the interpreter exits (an
// atexit hook registered by the module). A process that initialised MPI before importing
// ringtrain keeps it: the module then neither initialises nor finalises it. mpi4py is never
// imported: Debian builds it on Open MPI, and one process must not initialise two MPI
// libraries.
//
// Everything here runs with the GIL held, so calls into MPI come from one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/ring_transfer.hpp"

namespace ringtrain::python {

// A communicator handed to Python: MPI_COMM_WORLD or one made by split(). Owns its MPI_Comm
// when it was split (freed on destruction, unless MPI is already finalised).
class CommHandle {
 public:
  CommHandle(MPI_Comm comm, bool owned);
  ~CommHandle();
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  const collectives::Communicator& comm() const { return comm_; }
  MPI_Comm handle() const { return comm_.handle(); }

  // Payload bytes of this communicator's point-to-point calls from Python (send, recv,
  // sendrecv, isend, irecv), counted when the call is posted; what a course counts.
  std::size_t bytes_sent = 0, bytes_received = 0, messages_sent = 0, messages_received = 0;
  // The ring's scratch and requests, planned on the first collective and reused, as the
  // trainer and `ringtrain bench allreduce` reuse theirs.
  collectives::RingTransfer transfer;

 private:
  collectives::Communicator comm_;
  bool owned_;
};

// Initialises MPI unless it is (collective: every rank's first use of the module must come).
void ensure_mpi();
// True between ensure_mpi and finalisation.
bool mpi_active();
// MPI_COMM_WORLD as a handle; made on first call (collective: MPI_Comm_split_type).
std::shared_ptr<CommHandle> world();
// The atexit hook: drops the world handle, then MPI_Finalize if the module initialised MPI.
void finalize_mpi();

// BLAS threads (cores per node / ranks per node, as `ringtrain train` by default) and kernel
// choice ("auto"), set once before the first model computes; set_blas changes them.
void ensure_blas();
void set_blas(int threads, const std::string& kernels);

// The contained checkpoint reader's executable: `path` if not empty, else the one found by
// the Python package (set by ringtrain/__init__.py). Enabled once, on first checkpoint read.
void set_reader_executable(const std::string& path);
void ensure_contained_reader();

}  // namespace ringtrain::python
