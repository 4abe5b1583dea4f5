// ringtrain.mpi: a small communicator of our own, in the shape of mpi4py's buffer calls
// (Send/Recv/Sendrecv/Isend/Irecv/Allgather/Split), on NumPy arrays. A course's student
// writes a ring from these; the byte counters say what the student's code sent.
//
// Messages carry the arrays' bytes (any dtype, C-contiguous); a receive must get exactly as
// many bytes as its array holds (anything else is a ValueError naming both counts, the
// usual symptom of a wrong chunk). Ranks and tags are checked before MPI sees them. Every
// call holds the GIL: MPI is called from one thread at a time (MPI_THREAD_SERIALIZED).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "ringtrain/collectives/small.hpp"
#include "session.hpp"

namespace ringtrain::python {

namespace {

using collectives::check_mpi;

void check_peer(const CommHandle& c, int peer, const char* role) {
  if (peer < 0 || peer >= c.comm().size())
    throw py::value_error(std::string(role) + " " + std::to_string(peer) +
                          " is not a rank of this communicator (size " +
                          std::to_string(c.comm().size()) + ")");
}

void check_tag(const CommHandle& c, int tag) {
  if (tag < 0 || tag > c.comm().tag_upper_bound())
    throw py::value_error("tag " + std::to_string(tag) + " is outside [0, " +
                          std::to_string(c.comm().tag_upper_bound()) + "]");
}

void check_received(const MPI_Status& status, std::size_t expected, int source) {
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if (static_cast<std::size_t>(count) != expected)
    throw py::value_error("recv: " + std::to_string(count) + " bytes came from rank " +
                          std::to_string(source) + ", but the array holds " +
                          std::to_string(expected) + " bytes");
}

// A message's byte count as MPI's int.
int count_of(std::span<std::byte> bytes) {
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX))
    throw py::value_error("messages of 2 GiB and more are not supported; send them in parts");
  return static_cast<int>(bytes.size());
}

// A posted isend or irecv. It keeps its array alive until the message is complete; a request
// dropped unfinished is completed first (its memory must outlive the transfer).
class Request {
 public:
  Request(py::object array, MPI_Request request, std::size_t expected, int source)
      : array_(std::move(array)), request_(request), expected_(expected), source_(source) {}
  ~Request() {
    if (request_ != MPI_REQUEST_NULL && mpi_active()) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  void wait() {
    if (request_ == MPI_REQUEST_NULL) return;
    MPI_Status status;
    check_mpi(MPI_Wait(&request_, &status), "MPI_Wait");
    finish(status);
  }
  bool test() {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_Status status;
    check_mpi(MPI_Test(&request_, &done, &status), "MPI_Test");
    if (done) finish(status);
    return done != 0;
  }

 private:
  void finish(const MPI_Status& status) {
    if (source_ >= 0) check_received(status, expected_, source_);
    array_ = py::none();
  }

  py::object array_;
  MPI_Request request_;
  std::size_t expected_;
  int source_;  // -1 for a send
};

void send(CommHandle& c, const py::object& x, int dest, int tag) {
  check_peer(c, dest, "dest");
  check_tag(c, tag);
  const auto bytes = byte_span(x, "send: x", false);
  check_mpi(MPI_Send(bytes.data(), count_of(bytes), MPI_BYTE, dest, tag, c.handle()), "MPI_Send");
  c.bytes_sent += bytes.size();
  c.messages_sent += 1;
}

void recv(CommHandle& c, const py::object& x, int source, int tag) {
  check_peer(c, source, "source");
  check_tag(c, tag);
  const auto bytes = byte_span(x, "recv: x", true);
  MPI_Status status;
  check_mpi(MPI_Recv(bytes.data(), count_of(bytes), MPI_BYTE, source, tag, c.handle(), &status),
            "MPI_Recv");
  check_received(status, bytes.size(), source);
  c.bytes_received += bytes.size();
  c.messages_received += 1;
}

void sendrecv(CommHandle& c, const py::object& x, int dest, const py::object& y, int source,
              int sendtag, int recvtag) {
  check_peer(c, dest, "dest");
  check_peer(c, source, "source");
  check_tag(c, sendtag);
  check_tag(c, recvtag);
  const auto out = byte_span(x, "sendrecv: sendbuf", false);
  const auto in = byte_span(y, "sendrecv: recvbuf", true);
  MPI_Status status;
  check_mpi(MPI_Sendrecv(out.data(), count_of(out), MPI_BYTE, dest, sendtag, in.data(),
                         count_of(in), MPI_BYTE, source, recvtag, c.handle(), &status),
            "MPI_Sendrecv");
  check_received(status, in.size(), source);
  c.bytes_sent += out.size();
  c.bytes_received += in.size();
  c.messages_sent += 1;
  c.messages_received += 1;
}

// Posts an isend (sending) or an irecv of x's bytes to or from `peer`.
std::unique_ptr<Request> post(CommHandle& c, const py::object& x, int peer, int tag, bool sending) {
  check_peer(c, peer, sending ? "dest" : "source");
  check_tag(c, tag);
  const auto bytes = byte_span(x, sending ? "isend: x" : "irecv: x", !sending);
  MPI_Request request = MPI_REQUEST_NULL;
  if (sending) {
    check_mpi(MPI_Isend(bytes.data(), count_of(bytes), MPI_BYTE, peer, tag, c.handle(), &request),
              "MPI_Isend");
    c.bytes_sent += bytes.size();
    c.messages_sent += 1;
    return std::make_unique<Request>(x, request, 0, -1);
  }
  check_mpi(MPI_Irecv(bytes.data(), count_of(bytes), MPI_BYTE, peer, tag, c.handle(), &request),
            "MPI_Irecv");
  c.bytes_received += bytes.size();
  c.messages_received += 1;
  return std::make_unique<Request>(x, request, bytes.size(), peer);
}

// Every rank's x, stacked: (size, *x.shape). Ranks must pass arrays of the same byte size
// (checked on every rank before any data moves).
py::array allgather(CommHandle& c, const py::object& x) {
  const auto bytes = byte_span(x, "allgather: x", false);
  const auto a = py::reinterpret_borrow<py::array>(x);
  collectives::check_same_size(c.comm(), bytes.size(), "allgather");
  std::vector<py::ssize_t> shape{c.comm().size()};
  for (py::ssize_t i = 0; i < a.ndim(); ++i) shape.push_back(a.shape(i));
  py::array out(a.dtype(), shape);
  check_mpi(MPI_Allgather(bytes.data(), count_of(bytes), MPI_BYTE, out.mutable_data(),
                          count_of(bytes), MPI_BYTE, c.handle()),
            "MPI_Allgather");
  return out;
}

std::shared_ptr<CommHandle> split(CommHandle& c, int color, py::object key) {
  if (color < 0) throw py::value_error("split: color must be >= 0");
  const int k = key.is_none() ? c.comm().rank() : key.cast<int>();
  MPI_Comm part = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(c.handle(), color, k, &part), "MPI_Comm_split");
  return std::make_shared<CommHandle>(part, true);
}

py::dict counters(const CommHandle& c) {
  py::dict d;
  d["bytes_sent"] = c.bytes_sent;
  d["bytes_received"] = c.bytes_received;
  d["messages_sent"] = c.messages_sent;
  d["messages_received"] = c.messages_received;
  return d;
}

}  // namespace

void bind_mpi(py::module_& m) {
  py::module_ mpi = m.def_submodule(
      "mpi",
      "The module's own MPI (MPICH): ringtrain initialises it on first use and finalises it at "
      "exit, and never uses mpi4py (Debian builds mpi4py on Open MPI). Run scripts as "
      "`mpiexec.mpich -n N python3 script.py`.");

  py::class_<Request>(mpi, "Request", "A posted isend or irecv; keeps its array alive until done.")
      .def("wait", &Request::wait, "Blocks until the message is complete.")
      .def("test", &Request::test, "True once the message is complete (never blocks).");

  py::class_<CommHandle, std::shared_ptr<CommHandle>>(
      mpi, "Comm",
      "A communicator. Point-to-point calls take NumPy arrays (any dtype, C-contiguous) and "
      "move their bytes; a receive must get exactly its array's size. counters() gives the "
      "payload bytes and messages of this communicator's point-to-point calls.")
      .def_property_readonly("rank", [](const CommHandle& c) { return c.comm().rank(); })
      .def_property_readonly("size", [](const CommHandle& c) { return c.comm().size(); })
      .def(
          "barrier", [](const CommHandle& c) { collectives::barrier(c.comm()); },
          "Returns once every rank has entered it. Collective.")
      .def("send", &send, py::arg("x"), py::arg("dest"), py::arg("tag") = 0,
           "Sends x's bytes to rank dest (blocking).")
      .def("recv", &recv, py::arg("x"), py::arg("source"), py::arg("tag") = 0,
           "Receives into x (in place) from rank source; the message must fill x exactly.")
      .def("sendrecv", &sendrecv, py::arg("sendbuf"), py::arg("dest"), py::arg("recvbuf"),
           py::arg("source"), py::arg("sendtag") = 0, py::arg("recvtag") = 0,
           "Sends sendbuf to dest while receiving recvbuf from source (no deadlock in a ring).")
      .def(
          "isend",
          [](CommHandle& c, const py::object& x, int dest, int tag) {
            return post(c, x, dest, tag, true);
          },
          py::arg("x"), py::arg("dest"), py::arg("tag") = 0,
          "Posts a send; x must not change until the Request's wait() returns.")
      .def(
          "irecv",
          [](CommHandle& c, const py::object& x, int source, int tag) {
            return post(c, x, source, tag, false);
          },
          py::arg("x"), py::arg("source"), py::arg("tag") = 0,
          "Posts a receive into x; its contents are defined once wait() returns.")
      .def("allgather", &allgather, py::arg("x"),
           "Every rank's x stacked into a new array of shape (size, *x.shape). Collective.")
      .def("split", &split, py::arg("color"), py::arg("key") = py::none(),
           "A communicator of the ranks that pass the same color, ordered by key (default: "
           "rank). Collective.")
      .def("counters", &counters, "Payload bytes and messages sent and received so far.")
      .def(
          "reset_counters",
          [](CommHandle& c) {
            c.bytes_sent = c.bytes_received = c.messages_sent = c.messages_received = 0;
          },
          "Sets the counters to zero.");

  mpi.def("world", &world,
          "The communicator of every rank (MPI_COMM_WORLD). The first call initialises MPI and "
          "is collective.");
  mpi.def("initialized", &mpi_active, "True while the module's MPI is up.");
}

}  // namespace ringtrain::python
