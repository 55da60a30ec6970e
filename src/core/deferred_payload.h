// Weight payloads read from the model file when a kernel first reads them, not at import.
//
// Why: at import every large initializer used to be read into fresh memory, which the
// kernel zeroes page by page before the copy; most of them are then packed by their kernel
// and released (core/constant_release.h). Read when the kernel is created instead, inside
// the executor's LargePageRecycleScope (core/large_pages.h), a payload lands in the memory
// the previous kernel's released payload just gave back, and only the packed copies need
// fresh pages. It also lowers the peak memory of creation: the originals are never all
// resident at once.
//
// Only session creation asks for it (ImportOptions::defer_weight_reads), and the session
// calls LoadAll before creation returns: every payload still alive is read then, and a read
// that failed (a file truncated after import) fails the creation with an error that names
// the tensor and the file. A payload that could not be read reads as zeros until then, so
// no caller ever sees a null pointer. A packer may also read a payload block by block
// (Buffer::ReadBytes) while it is still on disk; then it is never loaded at all once the
// packed kernel releases it. Thread-safe: kernels may read a payload from several
// pool threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace strata {

class DeferredBuffer;

// One per imported file: its own descriptor (a dup, so the import's may close) and the
// buffers made from it.
class DeferredPayloads : public std::enable_shared_from_this<DeferredPayloads> {
 public:
  // dup()s fd; `path` names the file in errors.
  static Result<std::shared_ptr<DeferredPayloads>> Open(int fd, const std::string& path);
  ~DeferredPayloads();
  DeferredPayloads(const DeferredPayloads&) = delete;
  DeferredPayloads& operator=(const DeferredPayloads&) = delete;

  // A buffer of `length` bytes at `offset` of the file, read on its first data() call.
  // `what` names the tensor in errors ("initializer 'W'").
  std::shared_ptr<Buffer> Make(uint64_t offset, size_t length, const std::string& what);

  // Reads every buffer that is still alive, not released and not yet read; then the first
  // read error of any buffer of this file (including ones released since), or OK.
  Status LoadAll();

  // Buffers made so far, read so far (for tests and the load trace).
  size_t made() const;
  size_t loaded() const;

 private:
  friend class DeferredBuffer;
  DeferredPayloads(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // Reads [offset, offset + length) into dst; an error names `what` and the file.
  Status Read(uint64_t offset, size_t length, char* dst, const std::string& what) const;
  void Loaded(const Status& st);
  // A block read (DeferredBuffer::ReadBytes) failed: LoadAll reports it too.
  void Failed(const Status& st);

  const int fd_;
  const std::string path_;
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<DeferredBuffer>> buffers_;
  size_t made_ = 0, loaded_ = 0;
  Status first_error_;
};

}  // namespace strata
