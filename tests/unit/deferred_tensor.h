// A float tensor whose payload is still in a file (a deferred weight payload, as session
// creation imports large initializers: core/deferred_payload.h), for tests of the packers
// that read such a weight block by block.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "core/deferred_payload.h"
#include "core/tensor.h"
#include "test_files.h"

namespace strata::testing {

struct OnDiskTensor {
  std::string path;                          // the file holding the payload
  std::shared_ptr<DeferredPayloads> source;  // its deferred payloads (loaded() counts full reads)
  Tensor tensor;                             // `values` with the given shape, not yet read
};

// Writes `values` into dir/name after `lead` bytes of padding and returns a tensor that reads
// them from there; the payload is named "initializer 'W'" in errors. An empty path on failure.
inline OnDiskTensor WriteOnDisk(const TempDir& dir, const std::string& name, const std::vector<float>& values,
                                Shape shape, size_t lead = 12) {
  OnDiskTensor out;
  std::string bytes(lead, 'x');
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  dir.Write(name, bytes);
  const std::string path = dir.File(name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  auto src = DeferredPayloads::Open(fd, path);
  ::close(fd);
  if (!src.ok()) return out;
  out.path = path;
  out.source = *src;
  out.tensor = Tensor(DataType::kFloat, std::move(shape),
                      out.source->Make(lead, values.size() * sizeof(float), "initializer 'W'"));
  return out;
}

}  // namespace strata::testing
