// .npy reader (see npy.hpp for the format). The header dict is parsed by hand with a cursor
// over its bytes: every read checks the end first, every number is checked for overflow, and
// nothing is allocated from a size the file states until it has been checked against the file.
//
// Vocabulary: "dict" is the header's Python literal; "cursor" is the position in it.
#include "ringtrain/framework/data/npy.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

constexpr std::uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 63;

[[noreturn]] void fail(const fs::path& file, const std::string& problem) {
  throw DataError(fmt::format("{}: {}", file.string(), problem));
}

// Reads the dict literal. Grammar (whitespace = spaces, allowed between tokens):
//   dict  := '{' entry (',' entry)* ','? '}' spaces* '\n'
//   entry := string ':' value
//   value := string | 'True' | 'False' | '(' (int (',' int)* ','?)? ')'
class DictParser {
 public:
  DictParser(std::string_view text, const fs::path& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    expect('{');
    bool seen_descr = false, seen_order = false, seen_shape = false;
    NpyHeader header;
    while (true) {
      skip_spaces();
      if (peek() == '}') break;
      const std::string key = read_string();
      expect(':');
      if (key == "descr" && !seen_descr) {
        header.dtype = dtype_of(read_string());
        seen_descr = true;
      } else if (key == "fortran_order" && !seen_order) {
        if (read_bool())
          fail(file_,
               "Fortran order (fortran_order: True) is not supported; save a C-ordered "
               "array (numpy.ascontiguousarray)");
        seen_order = true;
      } else if (key == "shape" && !seen_shape) {
        header.shape = read_shape();
        seen_shape = true;
      } else {
        fail(file_, fmt::format("header key '{}' is unknown or repeated; a .npy header holds "
                                "descr, fortran_order and shape once each",
                                files::escaped(key)));
      }
      skip_spaces();
      if (peek() == ',')
        ++at_;
      else if (peek() != '}')
        fail(file_, fmt::format("header: expected ',' or '}}' at byte {}", at_));
    }
    ++at_;  // '}'
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
    if (at_ + 1 != text_.size() || text_[at_] != '\n')
      fail(file_, "header: the dict must be followed only by spaces and one '\\n'");
    if (!seen_descr || !seen_order || !seen_shape)
      fail(file_, "header lacks descr, fortran_order or shape");
    return header;
  }

 private:
  char peek() {
    if (at_ >= text_.size()) fail(file_, "header ends in the middle of the dict (truncated)");
    return text_[at_];
  }
  void skip_spaces() {
    while (peek() == ' ') ++at_;
  }
  void expect(char c) {
    skip_spaces();
    if (peek() != c) fail(file_, fmt::format("header: expected '{}' at byte {}", c, at_));
    ++at_;
  }

  std::string read_string() {
    skip_spaces();
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      fail(file_, fmt::format("header: expected a quoted string at byte {}", at_));
    const std::size_t begin = ++at_;
    while (peek() != quote) {
      if (text_[at_] == '\\') fail(file_, "header: escapes in strings are not supported");
      ++at_;
    }
    return std::string(text_.substr(begin, at_++ - begin));
  }

  bool read_bool() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t n = std::strlen(word);
      if (text_.substr(at_, n) == word) {
        at_ += n;
        return value;
      }
    }
    fail(file_, fmt::format("header: fortran_order must be True or False (byte {})", at_));
  }

  std::uint64_t read_dim() {
    skip_spaces();
    if (peek() < '0' || peek() > '9')
      fail(file_, fmt::format("header: expected a dimension at byte {}", at_));
    std::uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const std::uint64_t digit = static_cast<std::uint64_t>(text_[at_++] - '0');
      if (value > (kMaxDim - digit) / 10) fail(file_, "header: a dimension is larger than 2^63");
      value = value * 10 + digit;
    }
    return value;
  }

  std::vector<std::uint64_t> read_shape() {
    expect('(');
    std::vector<std::uint64_t> shape;
    while (true) {
      skip_spaces();
      if (peek() == ')') break;
      if (shape.size() == kNpyMaxDims)
        fail(file_, fmt::format("shape has more than {} dimensions", kNpyMaxDims));
      shape.push_back(read_dim());
      skip_spaces();
      if (peek() == ',')
        ++at_;
      else if (peek() != ')')
        fail(file_, fmt::format("header: expected ',' or ')' at byte {}", at_));
    }
    ++at_;  // ')'
    return shape;
  }

  // NumPy's little-endian descriptors ('|' for one-byte types, which have no byte order).
  DType dtype_of(const std::string& descr) {
    static constexpr std::pair<const char*, DType> kDescrs[] = {
        {"|b1", DType::kBool},    {"|i1", DType::kInt8},    {"<i1", DType::kInt8},
        {"|u1", DType::kUint8},   {"<u1", DType::kUint8},   {"<i2", DType::kInt16},
        {"<u2", DType::kUint16},  {"<i4", DType::kInt32},   {"<u4", DType::kUint32},
        {"<i8", DType::kInt64},   {"<u8", DType::kUint64},  {"<f2", DType::kFloat16},
        {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64},
    };
    for (const auto& [name, dtype] : kDescrs)
      if (descr == name) return dtype;
    if (!descr.empty() && descr[0] == '>')
      fail(file_, fmt::format("big-endian array (descr '{}') is not supported; save it "
                              "little-endian (array.astype(array.dtype.newbyteorder('<')))",
                              files::escaped(descr)));
    fail(file_, fmt::format("unsupported dtype (descr '{}'): x must be a float or integer "
                            "array, y integer or bool labels or float targets",
                            files::escaped(descr)));
  }

  std::string_view text_;
  const fs::path& file_;
  std::size_t at_ = 0;
};

std::uint32_t little_endian(std::span<const std::uint8_t> p) {
  std::uint32_t v = 0;
  for (std::size_t i = p.size(); i-- > 0;) v = (v << 8) | p[i];
  return v;
}

}  // namespace

NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, const fs::path& file) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail(file, "not a .npy file (it does not start with \\x93NUMPY)");
  const std::uint8_t major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2) || minor != 0)
    fail(file,
         fmt::format(".npy format version {}.{} is not supported (1.0 or 2.0)", major, minor));
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) fail(file, "truncated .npy header");
  const std::uint64_t dict_bytes = little_endian(bytes.subspan(8, length_bytes));
  if (dict_bytes > kNpyMaxHeaderBytes)
    fail(file, fmt::format(".npy header of {} bytes is longer than the {} allowed", dict_bytes,
                           kNpyMaxHeaderBytes));
  const std::size_t begin = 8 + length_bytes;
  if (bytes.size() - begin < dict_bytes)
    fail(file, fmt::format("truncated .npy header: it announces {} bytes, the file holds {}",
                           dict_bytes, bytes.size() - begin));
  const auto* text = reinterpret_cast<const char*>(bytes.data() + begin);
  NpyHeader header = DictParser(std::string_view(text, dict_bytes), file).parse();
  header.data_offset = begin + static_cast<std::size_t>(dict_bytes);
  return header;
}

StoredArray read_npy(const fs::path& file) {
  auto mapping = std::make_shared<const MappedFile>(file);
  const std::span<const std::uint8_t> bytes = mapping->bytes();
  const NpyHeader header = parse_npy_header(bytes, file);
  StoredArray array;
  array.where = file.string();
  array.dtype = header.dtype;
  array.shape = header.shape;
  const std::uint64_t held = bytes.size() - header.data_offset;
  const std::uint64_t need = checked_stored_bytes(header.shape, item_bytes(header.dtype),
                                                  UINT64_MAX, array.where, "64 bits can count");
  if (held < need)
    fail(file,
         fmt::format("truncated .npy data: shape ({}) of {} needs {} bytes, the file holds {}",
                     fmt::join(header.shape, ", "), to_string(header.dtype), need, held));
  if (held > need)
    fail(file, fmt::format("{} trailing byte(s) after the data that shape ({}) of {} announces",
                           held - need, fmt::join(header.shape, ", "), to_string(header.dtype)));
  array.mapping = std::move(mapping);
  array.offset = header.data_offset;
  return array;
}

namespace {

// A format 1.0 header for `descr` and `shape`, padded to a multiple of 64 bytes as NumPy
// writes it.
std::string npy_header(const char* descr, const std::vector<std::uint64_t>& shape) {
  const std::string shape_text = shape.size() == 1 ? fmt::format("({},)", shape[0])
                                                   : fmt::format("({})", fmt::join(shape, ", "));
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_text);
  // magic (6) + version (2) + length (2) + dict + '\n', a multiple of 64 bytes
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::string bytes(reinterpret_cast<const char*>(kMagic), sizeof kMagic);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  return bytes + dict;
}

// Appends the `size`-byte little-endian form of `bits`, whatever the host.
void append_le(std::string& bytes, std::uint64_t bits, int size) {
  for (int b = 0; b < size; ++b) bytes += static_cast<char>((bits >> (8 * b)) & 0xff);
}

}  // namespace

std::string npy_int64_vector(std::span<const std::int64_t> values) {
  std::string bytes = npy_header("<i8", {values.size()});
  for (std::int64_t v : values) append_le(bytes, static_cast<std::uint64_t>(v), 8);
  return bytes;
}

std::string npy_float32_array(std::span<const float> values,
                              const std::vector<std::uint64_t>& shape) {
  std::string bytes = npy_header("<f4", shape);
  for (float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    append_le(bytes, bits, 4);
  }
  return bytes;
}

}  // namespace ringtrain::data
