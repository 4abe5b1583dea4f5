// Failing together. Work that may fail on some ranks only (loading the data, reading a model
// spec or a key, resuming from a file) runs on every rank, and then every rank learns whether
// it failed anywhere and, if so, throws the same kind of error (error.hpp: UsageError is exit
// 2, AgreedError exit 1), so that no rank is left waiting in a collective for one that gave
// up. Rank 0 prints the one line the user reads; it throws with the message of the lowest
// rank that failed, the others with their own (or a pointer to rank 0's).
//
//   auto value = agreed<UsageError>(comm, [&] { return load(path); });
//   fail_together<AgreedError>(comm, error);   // error: this rank's failure, "" if none
//
// Collective: one small allreduce when nothing failed; the failures' messages then travel to
// rank 0 (gather_text).
#pragma once

#include <optional>
#include <string>
#include <type_traits>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

// nullopt if no rank failed (`mine` is this rank's failure, nullopt if none); otherwise the
// message this rank throws with: on rank 0 the lowest failing rank's, elsewhere its own, or
// for a rank that did not fail a pointer to rank 0's message. Collective.
std::optional<std::string> agree_on_failure(const collectives::Communicator& comm,
                                            const std::optional<std::string>& mine);

// Throws Failure on every rank if any rank passed a non-empty `error`. Collective.
template <typename Failure>
void fail_together(const collectives::Communicator& comm, const std::string& error) {
  const std::optional<std::string> message =
      agree_on_failure(comm, error.empty() ? std::nullopt : std::optional<std::string>(error));
  if (message) throw Failure(*message);
}

// Runs `work` on every rank; if it threw a Caught anywhere, every rank throws Failure (above).
// Returns work()'s value. Collective.
template <typename Failure = AgreedError, typename Caught = Error, typename Work>
auto agreed(const collectives::Communicator& comm, Work&& work) -> decltype(work()) {
  using Value = decltype(work());
  std::optional<std::string> failure;
  if constexpr (std::is_void_v<Value>) {
    try {
      work();
    } catch (const Caught& e) {
      failure = e.what();
    }
    if (const auto message = agree_on_failure(comm, failure)) throw Failure(*message);
  } else {
    Value value{};
    try {
      value = work();
    } catch (const Caught& e) {
      failure = e.what();
    }
    if (const auto message = agree_on_failure(comm, failure)) throw Failure(*message);
    return value;
  }
}

}  // namespace ringtrain
