// ringtrain-checkpoint-reader: the contained checkpoint reader (contained.hpp) as a program
// of its own. ringtrain starts it to parse one untrusted checkpoint with libhdf5, so that a
// file that crashes the library ends this process, not the training job. It links only the
// checkpoint module, statically where the toolchain allows, so that starting it costs about
// as much as starting /bin/true.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ringtrain/checkpoint/contained.hpp"

int main(int argc, char** argv) {
  using ringtrain::checkpoint::kReaderSubcommand;
  if (argc < 2 || std::string_view(argv[1]) != kReaderSubcommand) {
    std::fprintf(stderr,
                 "ringtrain-checkpoint-reader: started by ringtrain to read one checkpoint; "
                 "use 'ringtrain inspect FILE' instead\n");
    return 2;
  }
  // _Exit: the reply is written; HDF5's exit handlers would only add time to every read.
  std::_Exit(ringtrain::checkpoint::serve_contained_reader(argc, argv));
}
