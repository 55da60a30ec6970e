// Stub: replaced by the real importer.
#include "core/onnx_import.h"

namespace strata {
Result<Model> ImportOnnxFile(const std::string& path, ImportOptions) { return Unsupported("importer not built"); }
Result<Model> ImportOnnxBytes(const void*, size_t, const ImportOptions&) { return Unsupported("importer not built"); }
Result<Tensor> LoadTensorProtoFile(const std::string&) { return Unsupported("importer not built"); }
Result<Value> LoadValueProtoFile(const std::string&, const TypeInfo&) { return Unsupported("importer not built"); }
}  // namespace strata
