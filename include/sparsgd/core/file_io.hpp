#pragma once
// Writing a result file so that a run never claims a file it did not write: the contents go to a
// temporary file beside the target, every write, the flush, fsync and close are checked, and only
// then does a rename make it the file. A full disk or a read-only directory is an Error naming the
// path and the reason; the target is then either its old self or absent, never torn or empty.

#include <filesystem>
#include <string_view>

namespace sparsgd {

void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace sparsgd
