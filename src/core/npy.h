// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Supported element types: float32/64/16, int8/16/32/64, uint8/16/32/64 and bool,
// little-endian (or byte-order-free for one-byte types), C order; and numpy's
// fixed-width strings, 'U' (UTF-32, read as UTF-8) and 'S' (bytes), as string tensors
// (trailing zeros are padding, as in numpy). Fortran order,
// big-endian data and other numpy dtypes are UNSUPPORTED; every malformed file is
// INVALID_ARGUMENT with a message that names the file and the problem. The reader
// never trusts the header: sizes are checked for overflow and against the bytes
// actually present before anything is allocated, so it is safe on hostile input.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace strata {

// Reads a .npy file into a newly allocated tensor. NOT_FOUND if the file is missing,
// IO_ERROR if it cannot be read.
Result<Tensor> ReadNpy(const std::string& path);

// Parses an in-memory .npy image. `what` names the source in error messages
// (a path, "input 'image'", ...). The result owns a copy of the data.
Result<Tensor> ParseNpy(const void* data, size_t size, const std::string& what);

// Serialises `t` as .npy (version 1.0, or 2.0 when the header needs more than 64 KiB),
// with the header padded to a multiple of 64 bytes as numpy does. String tensors become
// '<U<width>' when every string is UTF-8, else '|S<width>' bytes.
// UNSUPPORTED for dtypes numpy .npy cannot express here (bfloat16, complex).
Result<std::string> SerializeNpy(const Tensor& t);

// Writes SerializeNpy(t) to `path`. IO_ERROR (naming the path) if the file cannot be
// written; a partly written file is removed.
Status WriteNpy(const std::string& path, const Tensor& t);

// The numpy descr for a dtype ("<f4", "|b1", ...), or nullptr if .npy I/O does not
// support it.
const char* NpyDescr(DataType dtype);

}  // namespace strata
