// The module's MPI, BLAS and reader settings (session.hpp).
#include "session.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/framework/blas.hpp"

namespace ringtrain::python {

namespace {

bool g_owns_mpi = false;
bool g_blas_set = false;
std::shared_ptr<CommHandle> g_world;
std::string g_reader;

bool finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

}  // namespace

CommHandle::CommHandle(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {}

CommHandle::~CommHandle() {
  if (!owned_ || finalized()) return;
  MPI_Comm handle = comm_.handle();
  MPI_Comm_free(&handle);
}

void ensure_mpi() {
  if (finalized()) throw std::runtime_error("ringtrain: MPI is already finalized (at exit)");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  collectives::check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                         "MPI_Init_thread");
  g_owns_mpi = true;
}

bool mpi_active() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized && !finalized();
}

std::shared_ptr<CommHandle> world() {
  ensure_mpi();
  if (!g_world) g_world = std::make_shared<CommHandle>(MPI_COMM_WORLD, false);
  return g_world;
}

void finalize_mpi() {
  g_world.reset();
  if (g_owns_mpi && !finalized()) MPI_Finalize();
  g_owns_mpi = false;
}

void set_blas(int threads, const std::string& kernels) {
  if (threads < 1) throw std::invalid_argument("set_blas: threads must be >= 1");
  blas::set_threads(threads);
  blas::set_kernels(blas::resolve_kernels(kernels));
  g_blas_set = true;
}

void ensure_blas() {
  if (g_blas_set) return;
  const int per_node = std::max(1, world()->comm().ranks_per_node());
  const int threads = std::max(1, blas::available_cores() / per_node);
  blas::set_threads(threads, per_node);  // the ranks sharing the node (the pool's waits)
  set_blas(threads, "auto");
}

void set_reader_executable(const std::string& path) {
  g_reader = path;
}

void ensure_contained_reader() {
  if (checkpoint::contained_reader_enabled()) return;
  if (g_reader.empty() || !std::filesystem::exists(g_reader))
    throw std::runtime_error(
        "ringtrain: the checkpoint reader program (ringtrain-checkpoint-reader) was not found" +
        (g_reader.empty() ? std::string() : " at " + g_reader) +
        "; checkpoints are only read through it (build or install it with the module)");
  checkpoint::enable_contained_reader(g_reader);
}

}  // namespace ringtrain::python
