// The one error type of the checkpoint module. Every failure to build, write, read, verify or
// commit a checkpoint is a CheckpointError whose message names the file and the reason:
//
//   "run/checkpoints/step-00000200.h5: /model/layers.0.linear/weight: shape (1024, 784) in
//    file, expected (1024, 785)"
//
// When HDF5 itself refused something, the innermost HDF5 error description is appended in
// brackets and the whole HDF5 error stack is kept in hdf5_stack() for logs.
//
// This module may not include framework/, so CheckpointError derives from
// std::runtime_error, not ringtrain::Error; the trainer wraps it where it needs to.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace ringtrain::checkpoint {

class CheckpointError : public std::runtime_error {
 public:
  // what() = "<file>: <reason>" (+ " [HDF5: <innermost description>]" if a stack is given).
  CheckpointError(const std::filesystem::path& file, const std::string& reason,
                  const std::string& hdf5_stack = {});
  // For errors that concern no file (an invalid entry name while building a tree).
  explicit CheckpointError(const std::string& reason);

  // The file as the caller named it; empty when no file is concerned.
  const std::filesystem::path& file() const noexcept { return details_->file; }
  // The reason without the file name, e.g. "/model/x: missing".
  const std::string& reason() const noexcept { return details_->reason; }
  // The HDF5 error stack, one line per frame, outermost first; empty if HDF5 was not involved.
  const std::string& hdf5_stack() const noexcept { return details_->hdf5_stack; }

 private:
  struct Details {
    std::filesystem::path file;
    std::string reason;
    std::string hdf5_stack;
  };
  std::shared_ptr<const Details> details_;  // shared: copying an exception never throws
};

}  // namespace ringtrain::checkpoint
