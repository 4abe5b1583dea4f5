// The project's error types. Every error ringtrain raises derives from ringtrain::Error,
// carries the offending values in its message and, where one exists, a hint for the user.
// `main` turns an uncaught Error into one line on rank 0 and a non-zero exit:
//   UsageError  -> exit 2 (bad flag, bad value, bad config key; nothing was written)
//   AgreedError -> exit 1 (every rank raised it after agreeing: bad data, diverged replicas)
//   any other   -> the job is aborted: one rank failed alone, the others would wait forever
#pragma once

#include <stdexcept>
#include <string>

namespace ringtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user asked for something invalid: a value out of range, an unknown model name.
class UsageError : public Error {
 public:
  using Error::Error;
};

// An input file is missing or malformed (IDX data, configuration).
class DataError : public Error {
 public:
  using Error::Error;
};

// Raised on every rank alike, after the ranks agreed that something failed (one collective
// decided it), so every rank can unwind and exit cleanly instead of aborting the job.
class AgreedError : public Error {
 public:
  using Error::Error;
};

}  // namespace ringtrain
