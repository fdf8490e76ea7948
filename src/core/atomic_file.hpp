// Every output file is written under a temporary name beside its final one and renamed when
// complete: a run that fails midway (disk full, killed) never leaves a file that looks finished.
#pragma once
#include <filesystem>
#include <string_view>

namespace tpgraph {

// Creates the parent folders. A folder or file that cannot be created or opened is an InputError
// naming it; a write that fails midway removes the temporary file and throws std::runtime_error.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace tpgraph
