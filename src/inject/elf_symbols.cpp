#include "inject/elf_symbols.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace tpgraph::inject {

namespace {

constexpr std::size_t kMaxObjects = 256;  // objects whose tables are kept

// A read-only mapping of a whole file, unmapped when it goes.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const unsigned char*>(p);
        size_ = static_cast<std::size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // A pointer to `count` objects of T at `offset`, or null where they do not lie inside the file.
  template <class T>
  [[nodiscard]] const T* at(std::uint64_t offset, std::uint64_t count = 1) const {
    if (data_ == nullptr || offset > size_ || count > (size_ - offset) / sizeof(T)) return nullptr;
    return reinterpret_cast<const T*>(data_ + offset);  // ELF tables are aligned in the file
  }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

std::unique_ptr<ElfSymbols> ElfSymbols::load(const std::string& path) {
  const MappedFile file(path);
  const auto* header = file.at<Elf64_Ehdr>(0);
  if (header == nullptr || std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
      header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_shentsize != sizeof(Elf64_Shdr))
    return nullptr;
  const auto* sections = file.at<Elf64_Shdr>(header->e_shoff, header->e_shnum);
  if (sections == nullptr) return nullptr;
  // The full table where the file kept it, the dynamic one otherwise.
  const Elf64_Shdr* table = nullptr;
  for (const std::uint32_t wanted : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (std::size_t i = 0; i < header->e_shnum && table == nullptr; ++i)
      if (sections[i].sh_type == wanted) table = &sections[i];
    if (table != nullptr) break;
  }
  if (table == nullptr || table->sh_link >= header->e_shnum || table->sh_entsize != sizeof(Elf64_Sym)) return nullptr;
  const Elf64_Shdr& strings = sections[table->sh_link];
  const auto* symbols = file.at<Elf64_Sym>(table->sh_offset, table->sh_size / sizeof(Elf64_Sym));
  const auto* names = file.at<char>(strings.sh_offset, strings.sh_size);
  if (symbols == nullptr || names == nullptr) return nullptr;

  auto out = std::unique_ptr<ElfSymbols>(new ElfSymbols());
  out->position_independent_ = header->e_type == ET_DYN;
  const std::size_t count = table->sh_size / sizeof(Elf64_Sym);
  for (std::size_t i = 0; i < count; ++i) {
    const Elf64_Sym& s = symbols[i];
    if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
        s.st_name >= strings.sh_size)
      continue;
    const char* name = names + s.st_name;
    const std::size_t length = strnlen(name, strings.sh_size - s.st_name);
    if (length == 0 || length == strings.sh_size - s.st_name) continue;  // empty, or runs off the table
    out->functions_.push_back({s.st_value, s.st_size, std::string(name, length)});
  }
  if (out->functions_.empty()) return nullptr;
  std::sort(out->functions_.begin(), out->functions_.end(),
            [](const Function& a, const Function& b) { return a.start < b.start; });
  return out;
}

std::string ElfSymbols::function_at(std::uintptr_t address, std::uintptr_t load_base) const {
  if (position_independent_ && address < load_base) return {};
  const std::uint64_t at = position_independent_ ? address - load_base : address;
  auto it = std::upper_bound(functions_.begin(), functions_.end(), at,
                             [](std::uint64_t a, const Function& f) { return a < f.start; });
  if (it == functions_.begin()) return {};
  --it;
  // A symbol without a size (hand-written assembly) covers nothing past its first byte.
  return at < it->start + std::max<std::uint64_t>(it->size, 1) ? it->name : std::string();
}

std::string function_name_at(const std::string& path, std::uintptr_t address, std::uintptr_t load_base) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ElfSymbols>> tables;  // null: the file gave none
  const std::lock_guard guard(mutex);
  auto it = tables.find(path);
  if (it == tables.end()) {
    if (tables.size() >= kMaxObjects) return {};
    it = tables.emplace(path, ElfSymbols::load(path)).first;
  }
  return it->second != nullptr ? it->second->function_at(address, load_base) : std::string();
}

}  // namespace tpgraph::inject
