// Reads the dynamic-linking facts of one ELF image with libelf (gelf_*).
#pragma once

#include <cstddef>
#include <string_view>

#include "audit/types.h"
#include "core/status.h"

namespace strata::audit {

// True when `head` starts with the 4-byte ELF magic.
bool HasElfMagic(std::string_view head);

// Parses an in-memory ELF image. `data` must stay alive during the call only; it is not
// modified. Truncated or malformed images return an error that says what is wrong.
Result<ElfInfo> ParseElf(const char* data, size_t size);

// Compares dotted numeric versions ("2.34" < "2.36", "3.4.9" < "3.4.30"). Returns <0, 0, >0.
int CompareVersions(std::string_view a, std::string_view b);

}  // namespace strata::audit
