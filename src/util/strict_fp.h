// Included by a .cpp (after its other includes) whose float arithmetic must round exactly as the reference writes
// it: one rounding per written operation, no multiply and add contracted into a fused multiply-add behind our back
// (where the reference fuses, the code spells out std::fma). Applies to the rest of the including file.
// Not `#pragma once`-guarded on purpose: it only sets the translation unit's floating-point contraction.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
