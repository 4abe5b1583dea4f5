// The child's side of the contained data reader (data_file.hpp): serves an Operation::kData
// request. Private to the checkpoint module; reader_child.cpp calls it.
#pragma once

#include "wire.hpp"

namespace ringtrain::checkpoint::detail {

// Reads the rest of a kData request from `in` (names, memory limit), checks the file
// (DataFileReader) and writes the reply to `fd`: the arrays' descriptions, then each array
// that is not mapped in pieces. A refusal before the descriptions is thrown (the caller
// sends it as any refusal); one while streaming is sent in the stream itself.
void serve_data_file(const std::filesystem::path& file, WireReader& in, int fd);

}  // namespace ringtrain::checkpoint::detail
