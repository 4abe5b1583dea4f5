// The POSIX file operations HDF5 does not do for us: fsync of a file and of a directory
// (HDF5 never fsyncs), small synced text files (LATEST), and positioned reads for
// streaming a dataset's raw bytes through a checksum without holding them all in memory.
// Every failure is a CheckpointError naming the path and the errno text.
// Private to the checkpoint module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace ringtrain::checkpoint::detail {

// open(O_RDONLY) + fsync + close: the file's data and metadata are on stable storage.
void fsync_file(const std::filesystem::path& path);
// open(O_RDONLY | O_DIRECTORY) + fsync + close: renames and creations inside are durable.
void fsync_directory(const std::filesystem::path& dir);
// Creates `path` new (files::NewFile: a leftover regular file is replaced, anything else
// there refused), writes `content`, fsyncs, closes.
void write_synced(const std::filesystem::path& path, std::string_view content);
// The same without the fsync (the caller fsyncs once it has finished the file).
void write_unsynced(const std::filesystem::path& path, std::string_view content);
// Overwrites bytes [offset, offset + bytes.size()) of an existing file (no fsync).
void write_at(const std::filesystem::path& path, std::uint64_t offset,
              std::span<const std::byte> bytes);
// The whole file if it is a regular file of at most max_bytes (files::read_small_file:
// opened without blocking, so a FIFO is refused, not waited on); throws otherwise.
std::string read_small_file(const std::filesystem::path& path, std::size_t max_bytes);

// Writes all of `bytes` to a pipe; false if the reader closed its end (it died). SIGPIPE is
// blocked for this thread during the write and a pending one is consumed.
bool write_to_pipe(int fd, std::string_view bytes);

// A read-only file descriptor (RAII, move-only) for positioned reads.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::filesystem::path& path);
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&&) = delete;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  std::uint64_t size() const;  // fstat
  // Fills `out` from byte `offset`; throws if the file ends first.
  void read_at(std::uint64_t offset, std::span<std::byte> out) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace ringtrain::checkpoint::detail
