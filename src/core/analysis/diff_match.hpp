// Private to run_diff: which variant of A goes with which of B, which node with which, and what
// changed in the graphs' structure (run_diff.hpp, steps 2 and 3).
#pragma once
#include <string>
#include <vector>

#include "core/analysis/run_diff.hpp"

namespace tpgraph::diff_detail {

struct VariantPair {
  int a = -1, b = -1;
  std::string matched_by;
};

// Pairs, and each unpaired variant as a StructuralChange.
[[nodiscard]] std::vector<VariantPair> match_variants(const DiffRun& a, const DiffRun& b,
                                                      std::vector<StructuralChange>& structure);

struct NodePairs {
  std::vector<int> b_of_a;  // [A node]: B's node, -1 none
  std::vector<int> a_of_b;  // [B node]: A's node, -1 none
};
// Nodes by key, then renamed kernels; nodes and edges added, removed and renamed into `structure`.
[[nodiscard]] NodePairs match_nodes(const DiffVariant& a, const DiffVariant& b, const std::string& variant,
                                    std::vector<StructuralChange>& structure);

// Whether the two runs may be compared at all (run_diff.hpp, step 4).
[[nodiscard]] Comparability comparability_of(const DiffRun& a, const DiffRun& b, const std::vector<VariantPair>& pairs,
                                             const DiffOptions& options);

}  // namespace tpgraph::diff_detail
