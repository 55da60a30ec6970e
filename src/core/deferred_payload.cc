#include "core/deferred_payload.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/import_internal.h"
#include "core/large_pages.h"

namespace strata {

class DeferredBuffer final : public Buffer {
 public:
  DeferredBuffer(std::shared_ptr<DeferredPayloads> src, uint64_t offset, size_t length, std::string what)
      : src_(std::move(src)), offset_(offset), length_(length), what_(std::move(what)) {}
  ~DeferredBuffer() override { Free(); }

  void* data() override {
    if (released_.load(std::memory_order_acquire)) return nullptr;
    std::call_once(once_, [this] { Load(); });
    return p_;
  }
  bool OnDisk() const override {
    return !released_.load(std::memory_order_acquire) && !loaded_.load(std::memory_order_acquire);
  }
  // Reads from the file while the payload is not loaded: a packer that reads the weight
  // block by block into a small buffer of its own never makes the payload resident.
  Status ReadBytes(size_t offset, size_t length, void* dst) override {
    if (released_.load(std::memory_order_acquire))
      return MakeStatus(StatusCode::kInternal, what_, ": read after its storage was released");
    if (offset > length_ || length > length_ - offset)
      return InvalidArgument(what_, ": read of ", length, " bytes at ", offset, " is outside its ", length_, " bytes");
    std::shared_ptr<DeferredPayloads> src;
    {
      std::lock_guard<std::mutex> lock(mu_);
      src = src_;
    }
    if (!src || loaded_.load(std::memory_order_acquire)) return Buffer::ReadBytes(offset, length, dst);
    Status st = src->Read(offset_ + offset, length, static_cast<char*>(dst), what_);
    if (!st.ok()) src->Failed(st);
    return st;
  }
  size_t size() const override { return released_.load(std::memory_order_acquire) ? 0 : length_; }
  bool ReleaseStorage() override {
    released_.store(true, std::memory_order_release);
    Free();
    std::lock_guard<std::mutex> lock(mu_);
    src_.reset();
    return true;
  }
  // Reads it now unless it was read or released already (LoadAll).
  void Touch() { (void)data(); }

 private:
  void Load() {
    // zeroed = false: the read fills every byte (or, when it fails, the rest is cleared).
    // Short-lived: most payloads are released once their kernel has packed them.
    p_ = AllocateLargePages(length_, &mapped_, /*zeroed=*/false, /*short_lived=*/true);
    if (!p_) {
      // Out of memory: an unpopulated zero mapping keeps callers off a null pointer (it
      // costs address space only) until the session reports the error.
      void* m = ::mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      p_ = m == MAP_FAILED ? nullptr : m;
      anon_ = p_ != nullptr;
      src_->Loaded(MakeStatus(StatusCode::kOutOfMemory, what_, ": cannot allocate ", length_, " bytes"));
      Loaded();
      return;
    }
    Status st = src_->Read(offset_, length_, static_cast<char*>(p_), what_);
    src_->Loaded(st);
    Loaded();
  }
  void Loaded() {
    loaded_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mu_);
    src_.reset();  // the last buffer read closes the file
  }
  void Free() {
    if (!p_) return;
    if (anon_) {
      ::munmap(p_, length_);
    } else {
      FreeLargePages(p_, mapped_);
    }
    p_ = nullptr;
  }

  std::shared_ptr<DeferredPayloads> src_;
  const uint64_t offset_;
  const size_t length_;
  const std::string what_;
  std::once_flag once_;
  std::atomic<bool> released_{false};
  std::atomic<bool> loaded_{false};  // set once p_ holds the bytes (or the zeros of a failed read)
  mutable std::mutex mu_;            // src_, which Load and ReleaseStorage reset while ReadBytes copies it
  void* p_ = nullptr;
  size_t mapped_ = 0;
  bool anon_ = false;
};

Result<std::shared_ptr<DeferredPayloads>> DeferredPayloads::Open(int fd, const std::string& path) {
  int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return MakeStatus(StatusCode::kIOError, "cannot keep '", path, "' open: ", std::strerror(errno));
  return std::shared_ptr<DeferredPayloads>(new DeferredPayloads(own, path));
}

DeferredPayloads::~DeferredPayloads() { ::close(fd_); }

std::shared_ptr<Buffer> DeferredPayloads::Make(uint64_t offset, size_t length, const std::string& what) {
  auto b = std::make_shared<DeferredBuffer>(shared_from_this(), offset, length, what);
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.push_back(b);
  ++made_;
  return b;
}

Status DeferredPayloads::Read(uint64_t offset, size_t length, char* dst, const std::string& what) const {
  size_t done = 0;
  Status st = import::ReadFully(fd_, offset, length, dst, path_, what, &done);
  if (done < length) std::memset(dst + done, 0, length - done);  // unread bytes read as zeros
  return st;
}

void DeferredPayloads::Failed(const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_error_.ok()) first_error_ = st;
}

void DeferredPayloads::Loaded(const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  ++loaded_;
  if (!st.ok() && first_error_.ok()) first_error_ = st;
}

Status DeferredPayloads::LoadAll() {
  std::vector<std::shared_ptr<DeferredBuffer>> alive;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& w : buffers_)
      if (auto b = w.lock()) alive.push_back(std::move(b));
    buffers_.clear();
  }
  for (const auto& b : alive) b->Touch();
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

size_t DeferredPayloads::made() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

size_t DeferredPayloads::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_;
}

}  // namespace strata
