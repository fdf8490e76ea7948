#include "core/report/output_folder.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/base/atomic_file.hpp"

namespace tpgraph {

namespace fs = std::filesystem;

namespace {

// A manifest lists a few files per graph; one past this is not ours.
constexpr std::uintmax_t kMaxManifestBytes = 16u << 20;

constexpr std::array<std::string_view, 2> kTopOutputs{"report.md", "report.json"};
constexpr std::array<std::string_view, 4> kGraphOutputs{"trace.json", "timeline.svg", "graph.dot", "cuda-graph.dot"};

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool listed(const std::vector<std::string>& files, const std::string& name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

// `relative` names an output file: report.md or report.json, or an output of one graph's folder
// (one plain name, not . or .., and not hidden).
bool is_output_path(const std::string& relative) {
  const fs::path p(relative);
  if (p.is_absolute()) return false;
  const std::vector<fs::path> parts(p.begin(), p.end());
  const auto named = [](const fs::path& part, auto names) {
    return std::find(names.begin(), names.end(), part.string()) != names.end();
  };
  if (parts.size() == 1) return named(parts[0], kTopOutputs);
  if (parts.size() != 2) return false;
  const std::string folder = parts[0].string();
  return !folder.empty() && folder[0] != '.' && named(parts[1], kGraphOutputs);
}

bool is_regular_file_no_follow(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

OutputManifest read_output_manifest(const fs::path& dir) {
  OutputManifest m;
  const fs::path path = dir / kOutputManifest;
  std::error_code ec;
  if (!is_regular_file_no_follow(path) || fs::file_size(path, ec) > kMaxManifestBytes || ec) return m;
  std::ifstream in(path, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("source") || !doc["source"].is_string() || !doc.contains("files") ||
      !doc["files"].is_array())
    return m;
  for (const auto& f : doc["files"]) {
    if (!f.is_string()) return m;
    m.files.push_back(f.get<std::string>());
  }
  m.source = doc["source"].get<std::string>();
  m.present = true;
  return m;
}

void write_output_manifest(const fs::path& dir, const OutputManifest& manifest) {
  const nlohmann::json doc = {{"source", manifest.source}, {"files", manifest.files}};
  write_file_atomically(dir / kOutputManifest, doc.dump(1) + "\n");
}

int remove_dead_writers_leftovers(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string manifest_temp = std::string(kOutputManifest) + ".tmp-";
    if ((name.rfind(kStagingPrefix, 0) == 0 && all_digits(std::string_view(name).substr(kStagingPrefix.size()))) ||
        (name.rfind(manifest_temp, 0) == 0 && all_digits(std::string_view(name).substr(manifest_temp.size()))))
      leftovers.push_back(entry.path());
  }
  for (const auto& path : leftovers) {
    std::error_code ignored;
    if (fs::remove_all(path, ignored) > 0) ++removed;
  }
  return removed;
}

bool holds_only_listed_outputs(const fs::path& dir, const OutputManifest& manifest) {
  if (!manifest.present) return false;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path relative = it->path().lexically_relative(dir);
    if (relative == fs::path(kOutputManifest)) continue;
    const auto status = it->symlink_status(ec);
    if (ec) return false;
    if (fs::is_directory(status)) {
      if (it.depth() > 0) return false;  // outputs sit at most one folder deep
      continue;
    }
    if (!fs::is_regular_file(status) || !listed(manifest.files, relative.string()) ||
        !is_output_path(relative.string()))
      return false;
  }
  return !ec;
}

void remove_outputs_not_rewritten(const fs::path& dir, const std::vector<std::string>& old_files,
                                  const std::vector<std::string>& new_files) {
  for (const auto& file : old_files) {
    if (listed(new_files, file) || !is_output_path(file)) continue;
    const fs::path path = dir / file;
    if (!is_regular_file_no_follow(path)) continue;
    std::error_code ignored;
    fs::remove(path, ignored);
    // The graph's folder goes when this was its last file (rmdir refuses a folder that holds more).
    if (path.parent_path() != dir) ::rmdir(path.parent_path().c_str());
  }
}

}  // namespace tpgraph
