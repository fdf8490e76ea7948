// The tool's version and the git revision it was built from, as --version and every report print
// them. Functions rather than macros: the revision changes with each commit, and only version.cpp
// sees the generated header, so a commit recompiles one file instead of the whole tree.
#pragma once
#include <string_view>

namespace tpgraph {

[[nodiscard]] std::string_view build_version() noexcept;  // "0.1.0" (CMake's project version)
// 12 hex digits of HEAD at the build, "-dirty" after them where tracked files differed from it;
// "unknown" outside git.
[[nodiscard]] std::string_view build_git_revision() noexcept;

}  // namespace tpgraph
