// Function names for addresses that dladdr cannot name. dladdr reads only an object's dynamic symbol
// table, so a program's own functions (static ones, those in anonymous namespaces, an executable
// linked without -rdynamic) come back as "+0x26f0". The full symbol table (.symtab) of the file on
// disk names them, unless the file was stripped. Read once per object; no CUDA here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tpgraph::inject {

class ElfSymbols {
 public:
  // The function symbols of the ELF file at `path` (its .symtab, else its .dynsym), or null where
  // the file cannot be read, is not a 64-bit ELF file or has no function symbols.
  static std::unique_ptr<ElfSymbols> load(const std::string& path);

  // The raw (mangled) name of the function holding `address`, an address in the running process of
  // the object loaded at `load_base` (dladdr's dli_fbase); "" where no function symbol covers it.
  [[nodiscard]] std::string function_at(std::uintptr_t address, std::uintptr_t load_base) const;

  [[nodiscard]] std::size_t size() const { return functions_.size(); }

 private:
  struct Function {
    std::uint64_t start = 0;  // the symbol's value: an address of the file's own layout
    std::uint64_t size = 0;
    std::string name;
  };
  std::vector<Function> functions_;   // by start
  bool position_independent_ = true;  // ET_DYN: values are offsets from the load base; ET_EXEC: absolute
};

// The raw name of the function at `address` in the object at `path` loaded at `load_base`, through a
// process-wide cache of loaded tables (bounded); "" where unknown. Thread-safe.
[[nodiscard]] std::string function_name_at(const std::string& path, std::uintptr_t address, std::uintptr_t load_base);

}  // namespace tpgraph::inject
