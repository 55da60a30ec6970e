// Compiles the code between STRATA_BF16_TARGET_BEGIN and STRATA_BF16_TARGET_END for
// AVX-512 with BF16 (the rest of the file keeps the baseline ISA). Callers reach such code
// only after Bf16GemmAvailable(). GCC takes a target pragma; clang (the fuzz and sanitizer
// builds) an attribute push.
#pragma once

// clang-format off
#if defined(__clang__)
// One string literal: _Pragma takes no concatenation.
#define STRATA_BF16_TARGET_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512bf16\"))), apply_to = function)")
#define STRATA_BF16_TARGET_END _Pragma("clang attribute pop")
#else
#define STRATA_BF16_TARGET_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512bf16\")")
#define STRATA_BF16_TARGET_END _Pragma("GCC pop_options")
#endif
// clang-format on
