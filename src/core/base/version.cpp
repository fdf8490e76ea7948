#include "core/base/version.hpp"

#include "tpgraph/version.hpp"

namespace tpgraph {

std::string_view build_version() noexcept { return generated::kVersion; }

std::string_view build_git_revision() noexcept { return generated::kGitRevision; }

}  // namespace tpgraph
