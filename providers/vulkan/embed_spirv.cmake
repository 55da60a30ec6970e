# Turns a SPIR-V binary IN into a header OUT defining `static const uint32_t NAME[]`.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" len)
math(EXPR rem "${len} % 8")
if(NOT rem EQUAL 0 OR len EQUAL 0)
  message(FATAL_ERROR "${IN} is not a SPIR-V module (size not a multiple of 4)")
endif()
# Little-endian words: reorder each group of 4 bytes.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x........u,){8})" "\\1\n" words "${words}")
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#pragma once\n#include <stdint.h>\nstatic const uint32_t ${NAME}[] = {\n${words}\n};\n")
