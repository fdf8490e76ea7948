#include "catch.hpp"

#include <algorithm>
#include <string>

#include "core/base/error.hpp"
#include "core/numerics/geometry.hpp"
#include "core/numerics/router.hpp"

using namespace tpgraph;

namespace {

// The InputError message of validate(g), or "" if it passed.
std::string rejection(const Geometry& g) {
  try {
    validate(g);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the default geometry is the harness's and is valid", "[geometry]") {
  const Geometry g;
  CHECK(g.experts == 288);
  CHECK(g.top_k == 8);
  CHECK(g.hidden == 4096);
  CHECK(g.ff == 640);
  CHECK(g.tokens == 4096);
  CHECK(g.ranks == 2);
  CHECK(rejection(g).empty());
}

TEST_CASE("invalid geometry is rejected naming the field and what is accepted", "[geometry]") {
  struct Case {
    const char* field;
    Geometry g;
  };
  auto with = [](auto change) {
    Geometry g;
    change(g);
    return g;
  };
  const Case cases[] = {
      {"hidden", with([](Geometry& g) { g.hidden = 100; })},
      {"hidden", with([](Geometry& g) { g.hidden = 0; })},
      {"ff", with([](Geometry& g) { g.ff = 96; })},
      {"tokens", with([](Geometry& g) { g.tokens = 0; })},
      {"tokens", with([](Geometry& g) { g.tokens = -3; })},
      {"top_k", with([](Geometry& g) { g.top_k = 999; })},
      {"top_k", with([](Geometry& g) { g.top_k = 0; })},
      {"experts", with([](Geometry& g) { g.experts = 0; })},
      {"ranks", with([](Geometry& g) { g.ranks = 0; })},
      {"tokens", with([](Geometry& g) { g.tokens = kMaxTokens + 1; })},
      {"hidden", with([](Geometry& g) { g.hidden = kMaxWidth + 64; })},
  };
  for (const auto& c : cases) {
    const auto message = rejection(c.g);
    INFO(message);
    CHECK(mentions(message, c.field));
    CHECK(mentions(message, "accepted"));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("pairs that would overflow the int32 CSR are rejected", "[geometry]") {
  Geometry g;
  g.experts = 4096;
  g.top_k = 4096;
  g.tokens = kMaxTokens;
  const auto message = rejection(g);
  INFO(message);
  CHECK(mentions(message, "tokens * top_k"));
}

TEST_CASE("an NVFP4 matrix takes 36 bytes per 64 elements", "[geometry]") {
  CHECK(nvfp4_matrix_bytes(640, 4096) == 640 * 64 * 36);
  CHECK(nvfp4_matrix_bytes(4096, 640) == 4096 * 10 * 36);
  CHECK(nvfp4_matrix_bytes(1, 64) == 36);
}

TEST_CASE("memory per rank counts every buffer of the chain", "[geometry]") {
  const Geometry g;  // t=4096, hidden 4096, ff 640, 288 experts, k=8 -> 32768 pairs
  const std::int64_t t = 4096, h = 4096, f = 640, p = 32768, e = 288;
  const auto m = memory_per_rank(g);
  const std::int64_t weights = e * (2 * (f * h / 64 * 36) + h * f / 64 * 36) + 3 * e * 4;
  CHECK(m.weights == weights);
  const std::int64_t z = t * h * 4, out = t * h * 4;
  const std::int64_t z16 = p * h * 2, zs = p * 4;
  const std::int64_t gate = p * f * 4, up = p * f * 4, a = p * f * 4;
  const std::int64_t a16 = p * f * 2, as = p * 4;
  const std::int64_t y = p * h * 4;
  CHECK(m.activations == z + z16 + zs + gate + up + a + a16 + as + y + out);
  CHECK(m.routing == e * 4 + (e + 1) * 4 + 3 * p * 4);
  CHECK(m.staging == 0);
  CHECK(m.pool == 0);
  CHECK(m.total() == m.weights + m.activations + m.routing);
  CHECK(working_set_bytes(g) == z16 + zs + gate + up + a + a16 + as + y);
}

TEST_CASE("the root stages the other ranks' partials and fresh alloc adds the pool", "[geometry]") {
  Geometry g;
  g.ranks = 4;
  const auto root = memory_per_rank(g, 3, true);
  CHECK(root.staging == 3 * std::int64_t{g.tokens} * g.hidden * 4);
  CHECK(root.pool == working_set_bytes(g));
  CHECK(root.total() == memory_per_rank(g).total() + root.staging + root.pool);
}

TEST_CASE("format_bytes keeps three significant figures", "[geometry]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1024) == "1.00 KiB");
  CHECK(format_bytes(std::int64_t{84} * 1024 * 1024) == "84.0 MiB");
  CHECK(format_bytes(std::int64_t{640} * 1024) == "640 KiB");
  CHECK(format_bytes(std::int64_t{1364} * 1024 * 1024) == "1.33 GiB");
}

TEST_CASE("memory that does not fit says how much is needed", "[geometry]") {
  CHECK_NOTHROW(check_memory_fits(100, 100, 0));
  try {
    check_memory_fits(std::int64_t{3} << 30, std::int64_t{1} << 30, 1);
    FAIL("no error for 3 GiB on a 1 GiB GPU");
  } catch (const InputError& e) {
    const std::string message = e.what();
    CHECK(mentions(message, "GPU 1"));
    CHECK(mentions(message, "3.00 GiB"));
    CHECK(mentions(message, "1.00 GiB"));
  }
}

TEST_CASE("expert counts without the per-pair arrays match the routing's", "[geometry][router][hostile]") {
  for (const int experts : {1, 2, 7, 288, 4096}) {
    Geometry g;
    g.experts = experts;
    g.top_k = std::min(8, experts);
    g.tokens = 1 << 18;
    INFO("experts " << experts);
    const Routing r = build_routing(g);
    const ExpertCounts c = count_expert_rows(g);
    CHECK(c.n_pairs == r.n_pairs());
    REQUIRE(c.expert_rows.size() == r.expert_rows.size());
    bool same = true;
    for (std::size_t e = 0; e < c.expert_rows.size(); ++e) same = same && c.expert_rows[e] == r.expert_rows[e];
    CHECK(same);
    const RoutingStats a = routing_stats(r);
    const RoutingStats b = routing_stats(c);
    CHECK(a.n_active == b.n_active);
    CHECK(a.min_rows == b.min_rows);
    CHECK(a.max_rows == b.max_rows);
    CHECK(a.median_rows == b.median_rows);
  }
}

TEST_CASE("check's host memory is counted and a geometry that cannot fit is refused", "[geometry][hostile]") {
  Geometry g;
  const std::int64_t host = host_memory_for_check(g);
  CHECK(host > g.ranks * memory_per_rank(g).weights);
  CHECK_NOTHROW(check_host_memory_fits(host, host, "check"));
  CHECK_NOTHROW(check_host_memory_fits(host, -1, "check"));  // unknown: not refused
  CHECK_THROWS_AS(check_host_memory_fits(host, host - 1, "check"), InputError);
  CHECK(available_host_memory() > 0);
}
