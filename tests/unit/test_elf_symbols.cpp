// The injection library's ELF symbol reader (src/inject/elf_symbols.cpp): it names this test
// binary's own functions, those dladdr cannot name, and refuses files that are not ELF or are cut.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "catch.hpp"
#include "inject/elf_symbols.hpp"

namespace {

// Local functions: in .symtab only, never in the dynamic table dladdr reads.
[[gnu::noinline]] int elf_probe_local(int x) { return x * 3 + 1; }
[[gnu::noinline]] int elf_probe_other(int x) { return x * 5 + 2; }

std::uintptr_t load_base_of(const void* address) {
  Dl_info info{};
  REQUIRE(dladdr(address, &info) != 0);
  return reinterpret_cast<std::uintptr_t>(info.dli_fbase);
}

std::string write_file(const std::string& name, const std::vector<char>& bytes) {
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<char> self_bytes() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("ELF symbols name a program's local functions that dladdr cannot", "[elf]") {
  const auto* probe = reinterpret_cast<const void*>(&elf_probe_local);
  Dl_info info{};
  REQUIRE(dladdr(probe, &info) != 0);
  CHECK(info.dli_sname == nullptr);  // what the reader is for
  const auto symbols = tpgraph::inject::ElfSymbols::load("/proc/self/exe");
  REQUIRE(symbols != nullptr);
  CHECK(symbols->size() > 100);
  const std::uintptr_t base = load_base_of(probe);
  const auto at = reinterpret_cast<std::uintptr_t>(probe);
  CHECK(symbols->function_at(at, base).find("elf_probe_local") != std::string::npos);
  CHECK(symbols->function_at(at + 4, base).find("elf_probe_local") != std::string::npos);  // inside it
  const auto other = reinterpret_cast<std::uintptr_t>(&elf_probe_other);
  CHECK(symbols->function_at(other, base).find("elf_probe_other") != std::string::npos);
  CHECK(symbols->function_at(base - 1, base).empty());  // below the object
  CHECK(elf_probe_local(1) + elf_probe_other(1) == 11);
  // The cached form, as the capture-site walk calls it.
  CHECK(tpgraph::inject::function_name_at("/proc/self/exe", at, base).find("elf_probe_local") != std::string::npos);
}

TEST_CASE("ELF symbols: files that are not ELF, cut short or with tables out of range give none", "[elf]") {
  using tpgraph::inject::ElfSymbols;
  CHECK(ElfSymbols::load("/nonexistent/tpgraph-elf-test") == nullptr);
  CHECK(ElfSymbols::load(write_file("tpgraph-elf-text", {'h', 'e', 'l', 'l', 'o'})) == nullptr);
  const std::vector<char> self = self_bytes();
  REQUIRE(self.size() > 4096);
  // The header alone: the section headers lie past the end.
  CHECK(ElfSymbols::load(write_file("tpgraph-elf-cut", std::vector<char>(self.begin(), self.begin() + 64))) == nullptr);
  // Every byte past the first 4 KiB gone: the header reads, the tables do not.
  CHECK(ElfSymbols::load(write_file("tpgraph-elf-half", std::vector<char>(self.begin(), self.begin() + 4096))) ==
        nullptr);
  // The section header offset pointed far past the end.
  std::vector<char> moved = self;
  const std::uint64_t far = ~std::uint64_t{0} - 16;
  std::memcpy(moved.data() + 0x28, &far, sizeof far);  // e_shoff in Elf64_Ehdr
  CHECK(ElfSymbols::load(write_file("tpgraph-elf-moved", moved)) == nullptr);
  CHECK(tpgraph::inject::function_name_at("/nonexistent/tpgraph-elf-test", 0x1000, 0).empty());
}
