// The ring and the pure functions of collectives/ (and the sampler's permutation) for Python.
//
//   allreduce(x, comm)       x <- Σ over ranks of x, the ring of ring.hpp, in place
//   reduce_scatter(x, comm)  chunk `rank` of x <- its sum (chunk(M, N, r)), in place
//   all_gather(x, comm)      every rank's chunk `rank`, gathered into every x, in place
//   mpi_allreduce(x, comm)   MPICH's MPI_Allreduce on the same array (the peer)
//   allreduce_exact(x, comm) the grid sum (grid_sum.hpp): the same bits for any N and order
// The ring calls return the call's counters as a dict (rounds, bytes_sent, bytes_received:
// this rank's payload), the same bits as the C++ ring, since they are that code on the
// caller's memory (no copy). All are collective over `comm` (default: the world).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "ringtrain/checkpoint/interval.hpp"
#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/cost_model.hpp"
#include "ringtrain/collectives/grid_sum.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "session.hpp"

namespace ringtrain::python {

namespace {

namespace coll = collectives;

std::shared_ptr<CommHandle> comm_or_world(const std::shared_ptr<CommHandle>& comm) {
  return comm ? comm : world();
}

py::dict counters_dict(const coll::Counters& c) {
  py::dict d;
  d["rounds"] = c.rounds;
  d["bytes_sent"] = c.bytes_sent;
  d["bytes_received"] = c.bytes_received;
  return d;
}

// One of the ring's collectives on x, in place, with the communicator's reused transfer.
py::dict ring_call(const py::object& x, const std::shared_ptr<CommHandle>& comm,
                   coll::Collective which, coll::Algorithm algorithm, const char* name) {
  const std::span<float> data = float32_span(x, std::string("ringtrain.") + name + ": x");
  const auto c = comm_or_world(comm);
  coll::RingOptions options;
  options.algorithm = algorithm;
  return counters_dict(coll::run_collective(c->transfer, c->comm(), data, which, options));
}

bool allreduce_exact(const py::object& x, const std::shared_ptr<CommHandle>& comm) {
  const std::span<float> data = float32_span(x, "ringtrain.allreduce_exact: x");
  const auto c = comm_or_world(comm);
  const std::size_t blocks[1] = {data.size()};
  coll::GridSum sum(blocks);
  sum.add(data, coll::GridSum::Keep::kBorrow);  // out may be the same memory (grid_sum.hpp)
  return coll::allreduce_grid(c->comm(), sum, data);
}

py::list plan_buckets(const std::vector<std::size_t>& sizes, std::size_t bucket_bytes) {
  if (bucket_bytes < sizeof(float))
    throw py::value_error("plan_buckets: bucket_bytes must be >= 4");
  py::list out;
  for (const coll::Bucket& b : coll::plan_buckets(sizes, bucket_bytes)) {
    py::dict d;
    d["offset"] = b.offset;
    d["elements"] = b.elements;
    d["first_parameter"] = b.first_parameter;
    d["parameters"] = b.parameters;
    out.append(d);
  }
  return out;
}

double ring_cost(int N, double M_bytes, double alpha_s, double bandwidth_Bps) {
  if (N < 1 || M_bytes < 0 || alpha_s < 0 || !(bandwidth_Bps > 0))
    throw py::value_error("ring_cost: needs N >= 1, M >= 0, alpha >= 0, B > 0");
  return coll::predict_seconds(coll::AlphaBeta{alpha_s, bandwidth_Bps}, N, M_bytes);
}

py::dict young_daly(double cost_s, double mtbf_s, double step_s, double latency_s) {
  const checkpoint::IntervalPlan p = checkpoint::young_daly(cost_s, mtbf_s, step_s, latency_s);
  py::dict d;
  d["tau_s"] = p.tau_s;
  d["every_steps"] = p.every_steps;
  d["predicted_overhead"] = p.predicted_overhead;
  d["cost_s"] = p.cost_s;
  d["mtbf_s"] = p.mtbf_s;
  d["step_s"] = p.step_s;
  d["latency_s"] = p.latency_s;
  return d;
}

py::array_t<std::uint64_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch,
                                             std::size_t n) {
  py::array_t<std::uint64_t> out(static_cast<py::ssize_t>(n));
  data::epoch_permutation(seed, epoch, std::span<std::uint64_t>(out.mutable_data(), n));
  return out;
}

}  // namespace

void bind_collectives(py::module_& m) {
  const auto comm = py::arg("comm") = std::shared_ptr<CommHandle>();
  m.def(
      "allreduce",
      [](const py::object& x, const std::shared_ptr<CommHandle>& c) {
        return ring_call(x, c, coll::Collective::kAllreduce, coll::Algorithm::kRing, "allreduce");
      },
      py::arg("x"), comm,
      "x <- the sum over ranks of x, in place, by the hand-written ring (reduce-scatter then "
      "all-gather). x: C-contiguous float32 NumPy array (refused otherwise: no copy is made). "
      "Returns this rank's counters of the call: rounds, bytes_sent, bytes_received "
      "(2(N-1) rounds and 2M(N-1)/N bytes each way for M bytes, when M >= N elements). "
      "Collective: every rank passes the same size.");
  m.def(
      "reduce_scatter",
      [](const py::object& x, const std::shared_ptr<CommHandle>& c) {
        return ring_call(x, c, coll::Collective::kReduceScatter, coll::Algorithm::kRing,
                         "reduce_scatter");
      },
      py::arg("x"), comm,
      "Chunk `rank` of x (see chunk()) <- the sum over ranks of that chunk, in place; the other "
      "chunks hold partial sums. Returns the call's counters. Collective.");
  m.def(
      "all_gather",
      [](const py::object& x, const std::shared_ptr<CommHandle>& c) {
        return ring_call(x, c, coll::Collective::kAllGather, coll::Algorithm::kRing, "all_gather");
      },
      py::arg("x"), comm,
      "Rank r's chunk r of x goes to every rank's x, in place. Returns the call's counters. "
      "Collective.");
  m.def(
      "mpi_allreduce",
      [](const py::object& x, const std::shared_ptr<CommHandle>& c) {
        return ring_call(x, c, coll::Collective::kAllreduce, coll::Algorithm::kMpi,
                         "mpi_allreduce");
      },
      py::arg("x"), comm,
      "x <- the sum over ranks by MPICH's MPI_Allreduce (in place): the peer the ring is "
      "measured against. Returns zero counters (MPI does not report its traffic).");
  m.def("allreduce_exact", &allreduce_exact, py::arg("x"), comm,
        "x <- the exact sum over ranks, rounded to float32 once (the grid sum): the same bits "
        "for any number of ranks and any order. Returns False (x all NaN) when some rank's x "
        "held a NaN or an Inf, else True. Collective.");
  m.def(
      "chunk",
      [](std::size_t M, std::size_t N, std::size_t i) {
        if (N < 1 || i >= N) throw py::value_error("chunk: needs N >= 1 and 0 <= i < N");
        return py::make_tuple(coll::chunk_begin(M, N, i), coll::chunk_size(M, N, i));
      },
      py::arg("M"), py::arg("N"), py::arg("i"),
      "(begin, size) of chunk i of M elements over N ranks: sizes differ by at most one, the "
      "larger chunks first (M=10, N=4: sizes 3 3 2 2).");
  m.def("plan_buckets", &plan_buckets, py::arg("layer_sizes"), py::arg("bucket_bytes"),
        "Gradient buckets for parameters of these element counts (in buffer order), at most "
        "bucket_bytes each (a larger parameter alone), in backward order: a list of dicts "
        "offset, elements, first_parameter, parameters.");
  m.def("ring_cost", &ring_cost, py::arg("N"), py::arg("M"), py::arg("alpha"), py::arg("B"),
        "Seconds of one ring allreduce of M bytes over N ranks by the alpha-beta model: "
        "2(N-1) alpha + 2(N-1)/N M/B.");
  m.def("young_daly", &young_daly, py::arg("C"), py::arg("mu"), py::arg("step_s") = 0.0,
        py::arg("latency_s") = 0.0,
        "The Young/Daly checkpoint interval: tau = sqrt(2 C mu) (at least the persist latency), "
        "in steps of step_s, and the predicted overhead C/tau + (tau/2 + L)/mu.");
  m.def("epoch_permutation", &epoch_permutation, py::arg("seed"), py::arg("epoch"), py::arg("n"),
        "The sample order of an epoch (uint64 array of n indices), as `ringtrain train` draws "
        "it: step s of the epoch takes positions [s B, (s+1) B).");
}

}  // namespace ringtrain::python
