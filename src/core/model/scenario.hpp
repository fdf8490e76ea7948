// A scenario: one variant of the layer graph (docs/scenario-format.md's fields) plus the geometry
// and the run's settings. Read from a JSON file in graphs/ (comments allowed); every field can be
// overridden on the command line. The one model that plan, dot, capture and the analysis all read.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/enum_format.hpp"
#include "core/numerics/geometry.hpp"
#include "core/numerics/nvfp4_layout.hpp"
#include "core/numerics/reference.hpp"

namespace tpgraph {

enum class PeerCopy { none, per_rank, first };  // copy z from the root to each other rank
enum class JoinKind { none, copy, reduce };     // partials back to the root (and summed)
enum class AllocKind { resident, fresh };       // working buffers resident or allocated in-graph
enum class IssueKind { graph, eager };          // capture once and replay, or issue every time

[[nodiscard]] std::string_view to_string(PeerCopy v);
[[nodiscard]] inline std::string_view format_as(PeerCopy v) { return to_string(v); }
[[nodiscard]] std::string_view to_string(JoinKind v);
[[nodiscard]] inline std::string_view format_as(JoinKind v) { return to_string(v); }
[[nodiscard]] std::string_view to_string(AllocKind v);
[[nodiscard]] inline std::string_view format_as(AllocKind v) { return to_string(v); }
[[nodiscard]] std::string_view to_string(IssueKind v);
[[nodiscard]] inline std::string_view format_as(IssueKind v) { return to_string(v); }

// Bounds that keep a run finite and its products in range; not tuned, only sane.
inline constexpr int kMaxReplays = 1'000'000;
inline constexpr int kMaxWarmup = 100'000;
// Scenario::warmup: warm up until the span is steady (analysis/steady.hpp's rule) rather than a count.
inline constexpr int kWarmupAuto = -1;
// "auto" or the count.
[[nodiscard]] std::string warmup_text(int warmup);
inline constexpr int kMaxLayers = 256;
inline constexpr int kMaxRootBusy = 1024;
inline constexpr int kMaxDevice = 1023;
inline constexpr std::size_t kMaxNameBytes = 100;  // a scenario's name is a folder name in a run
// Files at the top of every run folder: no variant's folder may take one of these names.
inline constexpr std::array<std::string_view, 3> kRunFolderFiles{"records.json", "report.md", "report.json"};

struct Scenario {
  std::string name = "baseline";
  std::string description = "two ranks, no peer copy, no join: the ranks should overlap";
  Geometry geometry;
  std::vector<int> devices;  // rank r runs on devices[r % size]; empty: the visible GPUs
  int replays = 100;
  int warmup = kWarmupAuto;  // untimed replays before the timed ones, or kWarmupAuto
  int layers = 1;
  PeerCopy peer_copy = PeerCopy::none;
  std::optional<int> copy_rows;  // rows of z each peer copy moves; nullopt: all tokens
  JoinKind join = JoinKind::none;
  int root_busy = 0;  // extra kernels on the root stream before the fork
  AllocKind alloc = AllocKind::resident;
  IssueKind issue = IssueKind::graph;
  Layout layout = Layout::v2;
  WeightsKind weights = WeightsKind::random;
  std::uint64_t seed = 1;

  // Rows a peer copy moves: min(copy_rows, tokens), or tokens.
  [[nodiscard]] int copy_row_count() const;
  // The GPU of rank r given the visible device count (used when `devices` is empty).
  [[nodiscard]] int device_of(int rank, int visible_devices) const;

  friend bool operator==(const Scenario&, const Scenario&) = default;
};

// Enum values by their file/flag spelling ("per-rank"). `where` names the field or flag for the
// message; a value not accepted throws InputError listing the accepted ones.
[[nodiscard]] PeerCopy parse_peer_copy(std::string_view value, std::string_view where);
[[nodiscard]] JoinKind parse_join(std::string_view value, std::string_view where);
[[nodiscard]] AllocKind parse_alloc(std::string_view value, std::string_view where);
[[nodiscard]] IssueKind parse_issue(std::string_view value, std::string_view where);
[[nodiscard]] Layout parse_layout(std::string_view value, std::string_view where);
[[nodiscard]] WeightsKind parse_weights(std::string_view value, std::string_view where);
// copy_rows: a positive row count, or "all" (nullopt).
[[nodiscard]] std::optional<int> parse_copy_rows(std::string_view value, std::string_view where);

// Memory of rank r under this scenario (the root stages partials when there is a join; alloc fresh
// adds the pool), and the sum per GPU when ranks share one: {device, bytes}, ascending device.
[[nodiscard]] MemoryEstimate memory_of_rank(const Scenario& s, int rank);
[[nodiscard]] std::vector<std::pair<int, std::int64_t>> memory_per_device(const Scenario& s, int visible_devices);

// Throws InputError naming the bad field or value (and what is accepted). Besides the ranges, the
// name must be 1 to kMaxNameBytes bytes and not one of kRunFolderFiles, and neither the name nor
// the description may hold a control character (they reach terminals, tables and folder names);
// the description may hold newlines and tabs.
void validate(const Scenario& s);

// Parse a scenario from JSON text; `origin` names the file in messages ("graphs/x.json:3:5: ...").
// Nesting deeper than kMaxJsonDepth is refused before parsing.
[[nodiscard]] Scenario parse_scenario(std::string_view json_text, std::string_view origin);
// Regular files only (a FIFO or /dev/zero is refused, not read), of at most 1 MiB.
[[nodiscard]] Scenario load_scenario(const std::filesystem::path& path);
// A scenario by name ("peer-copy") or path; names resolve in the graphs/ folder.
[[nodiscard]] Scenario resolve_scenario(std::string_view name_or_path, const std::filesystem::path& graphs_dir);
[[nodiscard]] std::string scenario_to_json(const Scenario& s);  // every field, round-trips
// The scenario files shipped in graphs/, in the order `run` replays them.
[[nodiscard]] std::vector<std::string> builtin_scenario_names();

}  // namespace tpgraph
