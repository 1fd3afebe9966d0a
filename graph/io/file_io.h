// Reading a model or data file whole (graph/io/file_io.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace qconv::graph::detail {

// The whole of a regular file of at most `limit` bytes (graph/io/file_io.cpp): a
// directory ("is a directory, not <kind>"), a device or a pipe, a larger file
// ("is larger than <limit_text>") or a failed read is a qconv::error on the
// field "file" naming the path.
std::string read_regular_file(const std::string &path, int64_t limit, const std::string &limit_text,
                              const std::string &kind);

} // namespace qconv::graph::detail
