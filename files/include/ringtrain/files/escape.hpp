// Bytes that came from a file, fit for a one-line message on a terminal. A file's header, key
// or value may hold anything: escape sequences that clear the screen or set the window
// title, a NUL that cuts the message, a megabyte of text. Every place where bytes of a file
// reach a message passes them through escaped():
//
//   printable ASCII (0x20..0x7e) except '\'   shown as it is
//   any other byte (controls, DEL, '\', >= 0x80)   \xNN (two lower-case hex digits)
//   more than max_bytes bytes                  the first max_bytes, then "... (N bytes)"
//
//   escaped("<f4\x1b]0;owned\x07") == "<f4\\x1b]0;owned\\x07"
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ringtrain::files {

// How many bytes of a file's text a message shows by default.
inline constexpr std::size_t kShownBytes = 80;

std::string escaped(std::string_view bytes, std::size_t max_bytes = kShownBytes);

}  // namespace ringtrain::files
