// Reading a whole input file (a model, a .npy array) with the checks every
// reader of the graph layer makes: a regular file, not larger than a limit,
// read completely. Failures are qconv::error on the field "file".
#include <filesystem>
#include <fstream>

#include "graph/io/file_io.h"
#include "graph/ir/detail.h"

namespace qconv::graph::detail {

std::string read_regular_file(const std::string &path, int64_t limit, const std::string &limit_text,
                              const std::string &kind) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) fail("file", "'" + path + "' is a directory, not " + kind);
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
        fail("file", "'" + path + "' is not a regular file (a device or a pipe is not read)");
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("file", "cannot open '" + path + "'");
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    if (size < 0) fail("file", "cannot read the size of '" + path + "'");
    if (size > limit) fail("file", "'" + path + "' is larger than " + limit_text);
    f.seekg(0);
    std::string bytes(static_cast<size_t>(size), '\0');
    f.read(bytes.data(), size);
    if (!f) fail("file", "reading '" + path + "' failed");
    return bytes;
}

} // namespace qconv::graph::detail
