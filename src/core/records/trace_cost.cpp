#include "core/records/trace_cost.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <utility>

#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/records/trace_file.hpp"

namespace tpgraph {

using nlohmann::json;

namespace {

// A JSON object of at most two levels (both files are flat); nullopt for anything else.
std::optional<json> flat_object(std::string_view text) {
  try {
    check_json_depth(text, "cost", 2);
  } catch (const InputError&) {
    return std::nullopt;
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// The unsigned integer at `key`, or nullopt when absent or of another type.
std::optional<std::uint64_t> unsigned_at(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

// A finite number >= 0 at `key`, or nullopt.
std::optional<double> figure_at(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) && v >= 0 ? std::optional<double>(v) : std::nullopt;
}

// The measured calibration's figures from cost.json; nullopt when one is missing or out of range.
std::optional<CostCalibration> measured_calibration(const json& j) {
  CostCalibration c;
  c.measured = true;
  const auto gpu = j.find("gpu");
  c.gpu = gpu != j.end() && gpu->is_string() ? tracefile::printable(gpu->get<std::string>()) : "";
  const auto device = unsigned_at(j, "device");
  const auto nodes = unsigned_at(j, "nodes");
  const auto replays = unsigned_at(j, "replays");
  const auto kernel_us = figure_at(j, "kernel_us");
  const auto off = figure_at(j, "off_us");
  const auto on = figure_at(j, "on_us");
  const auto per_node = figure_at(j, "per_node_us");
  if (!device || !nodes || !replays || !kernel_us || !off || !on || !per_node || *nodes == 0 || *nodes > 1'000'000 ||
      *device > 1'000'000 || *replays > 100'000'000)
    return std::nullopt;
  c.device = static_cast<int>(*device);
  c.nodes = static_cast<int>(*nodes);
  c.replays = static_cast<int>(*replays);
  c.kernel_us = *kernel_us;
  c.off_us = *off;
  c.on_us = *on;
  c.per_node_us = *per_node;
  return c;
}

}  // namespace

namespace tracefile {

std::string self_cost_chunk(const SelfCost& c) {
  const json j{{"callbacks", c.callbacks},
               {"callback_ns", c.callback_ns},
               {"launch_callback_ns", c.launch_callback_ns},
               {"launches", c.launches},
               {"buffers", c.buffers},
               {"buffer_records", c.buffer_records},
               {"buffer_ns", c.buffer_ns},
               {"activity_switches", c.activity_switches},
               {"activity_switch_ns", c.activity_switch_ns}};
  return chunk(ChunkType::cost, j.dump());
}

std::string read_self_cost_chunk(std::string_view payload, SelfCost& cost) {
  const auto j = flat_object(payload);
  if (!j) return "a cost chunk is not a JSON object (skipped)";
  SelfCost c;
  const char* keys[] = {"callbacks", "callback_ns",    "launch_callback_ns", "launches",
                        "buffers",   "buffer_records", "buffer_ns"};
  std::uint64_t* fields[] = {&c.callbacks, &c.callback_ns,    &c.launch_callback_ns, &c.launches,
                             &c.buffers,   &c.buffer_records, &c.buffer_ns};
  for (std::size_t i = 0; i < std::size(keys); ++i) {
    const auto v = unsigned_at(*j, keys[i]);
    if (!v) return fmt::format("a cost chunk without a count {} (skipped)", keys[i]);
    *fields[i] = *v;
  }
  // Optional (files written before they existed have neither).
  for (const auto& [key, field] :
       {std::pair{"activity_switches", &c.activity_switches}, std::pair{"activity_switch_ns", &c.activity_switch_ns}}) {
    if (!j->contains(key)) continue;
    const auto v = unsigned_at(*j, key);
    if (!v) return fmt::format("a cost chunk whose {} is not a count (skipped)", key);
    *field = *v;
  }
  if (c.launch_callback_ns > c.callback_ns) return "a cost chunk whose launch callbacks took longer than all (skipped)";
  c.present = true;
  cost = c;
  return {};
}

}  // namespace tracefile

CostCalibration cost_not_measured(std::string why) {
  CostCalibration c;
  c.not_measured = std::move(why);
  return c;
}

std::string cost_file_json(const CostCalibration& c) {
  if (!c.measured) return json{{"measured", false}, {"reason", c.not_measured}}.dump(1) + "\n";
  const json j{{"measured", true},
               {"gpu", c.gpu},
               {"device", c.device},
               {"nodes", c.nodes},
               {"kernel_us", c.kernel_us},
               {"replays", c.replays},
               {"off_us", c.off_us},
               {"on_us", c.on_us},
               {"per_node_us", c.per_node_us}};
  return j.dump(1) + "\n";
}

CostCalibration parse_cost_file(std::string_view text, std::string_view origin) {
  const auto j = flat_object(text);
  if (!j) return cost_not_measured(fmt::format("{} is not a JSON object", origin));
  const auto measured = j->find("measured");
  if (measured == j->end() || !measured->is_boolean())
    return cost_not_measured(fmt::format("{} does not say whether the cost was measured", origin));
  if (!measured->get<bool>()) {
    const auto reason = j->find("reason");
    return cost_not_measured(reason != j->end() && reason->is_string() && !reason->get<std::string>().empty()
                                 ? tracefile::printable(reason->get<std::string>())
                                 : fmt::format("{} gives no reason", origin));
  }
  if (auto c = measured_calibration(*j)) return *c;
  return cost_not_measured(fmt::format("{} has a figure missing or out of range", origin));
}

}  // namespace tpgraph
