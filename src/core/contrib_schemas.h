// libonnx schemas for ONNX Runtime's ai.onnx-domain contrib ops (contrib_schemas.cc).
#pragma once

namespace strata {

// Registers the schemas once per process (thread-safe; later calls return at once). The
// import calls it before the checker runs.
void EnsureContribSchemas();

}  // namespace strata
