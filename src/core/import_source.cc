// Model and external-data file access for the importer: the whole-file mapping the parser
// reads, and per-tensor buffers that map or pread a byte range (see LoadFileRange).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/import_internal.h"
#include "core/large_pages.h"

namespace strata::import {

namespace {

// Mapping smaller ranges would cost a VMA and up to two partial pages per tensor.
constexpr size_t kMapMinBytes = size_t{64} << 10;
#ifdef MADV_POPULATE_READ
constexpr int kMadvPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kMadvPopulateRead = 22;
#endif

// A tensor's bytes inside a private file mapping; unmapped when the last tensor using it goes.
class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(void* map, size_t map_len, size_t skip, size_t size)
      : map_(map), map_len_(map_len), data_(static_cast<char*>(map) + skip), size_(size) {}
  ~MappedBuffer() override { ReleaseStorage(); }
  void* data() override { return data_; }
  size_t size() const override { return size_; }
  bool ReleaseStorage() override {
    if (map_) ::munmap(map_, map_len_);
    map_ = data_ = nullptr;
    map_len_ = size_ = 0;
    return true;
  }

 private:
  void* map_;
  size_t map_len_;
  void* data_;
  size_t size_;
};

}  // namespace

bool MapWeightPayloads() {
  // Read per call (cheap next to a load), so tests can exercise both paths.
  const char* env = std::getenv("STRATA_MAP_WEIGHTS");
  if (env && env[0] == '1' && env[1] == '\0') return true;
  if (env && env[0] == '0' && env[1] == '\0') return false;
  return !LargePagesUsable();
}

Result<std::shared_ptr<Buffer>> LoadFileRange(int fd, uint64_t offset, size_t length, size_t elem_align, bool allow_map,
                                              const std::string& path, const std::string& what) {
  const size_t page = PageSize();
  if (allow_map && length >= kMapMinBytes && elem_align > 0 && offset % elem_align == 0) {
    uint64_t start = offset - offset % page;
    size_t skip = static_cast<size_t>(offset - start);
    // PROT_WRITE with MAP_PRIVATE: a kernel that writes into a constant gets its own page
    // copy instead of a fault, and the file is never modified.
    void* m = ::mmap(nullptr, length + skip, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
    if (m != MAP_FAILED) {
      // Fault the pages in now, in one call, without breaking copy-on-write (Linux 5.14+;
      // older kernels just fault them on first touch).
      ::madvise(m, length + skip, kMadvPopulateRead);
      return std::shared_ptr<Buffer>(std::make_shared<MappedBuffer>(m, length + skip, skip, length));
    }
    // Mapping can fail (no mmap on this file system, map count limit): read instead.
  }
  ASSIGN_OR_RETURN(auto buf, AllocateWeightBuffer(length));
  RETURN_IF_ERROR(ReadFully(fd, offset, length, static_cast<char*>(buf->data()), path, what));
  return buf;
}

namespace {
std::atomic<ReadHookForTesting> g_read_hook{nullptr};
std::atomic<void*> g_read_hook_ctx{nullptr};
}  // namespace

void SetReadHookForTesting(ReadHookForTesting hook, void* ctx) {
  g_read_hook_ctx.store(ctx);
  g_read_hook.store(hook);
}

void RunReadHookForTesting() {
  if (ReadHookForTesting hook = g_read_hook.load(std::memory_order_relaxed)) hook(g_read_hook_ctx.load());
}

Status ReadFully(int fd, uint64_t offset, size_t length, char* dst, const std::string& path, const std::string& what,
                 size_t* done_out) {
  size_t done = 0;
  Status st;
  while (done < length) {
    RunReadHookForTesting();
    ssize_t n = ::pread(fd, dst + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = MakeStatus(StatusCode::kIOError, what, ": cannot read '", path, "': ", std::strerror(errno));
      break;
    }
    if (n == 0) {
      st = MakeStatus(StatusCode::kIOError, what, ": short read from '", path,
                      "' (the file was truncated or replaced while it was being loaded)");
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (done_out) *done_out = done;
  return st;
}

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is rejected below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFound("cannot open '", path, "': file does not exist");
    return MakeStatus(StatusCode::kIOError, "cannot open '", path, "': ", std::strerror(errno));
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->fd_ = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return MakeStatus(StatusCode::kIOError, "cannot read '", path, "': ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return MakeStatus(StatusCode::kIOError, "cannot read '", path, "': it is a directory");
  // Devices and FIFOs could block or never end (/dev/zero).
  if (!S_ISREG(st.st_mode)) return MakeStatus(StatusCode::kIOError, "cannot read '", path, "': not a regular file");
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ == 0) return f;
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) return MakeStatus(StatusCode::kIOError, "cannot map '", path, "': ", std::strerror(errno));
  f->data_ = m;
  return f;
}

void MappedFile::Unmap() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
}

MappedFile::~MappedFile() {
  Unmap();
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace strata::import
