// Bit-for-bit comparison of floats for tests of exact arithmetic contracts.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

namespace larql::test {

// The same bits, or both NaN: which NaN an add of two NaNs returns depends on the order of
// its operands, which the compiler may swap (a + b is commutative but for NaN payloads).
inline ::testing::AssertionResult same_bits_or_both_nan(float actual, float expected) {
  if (std::isnan(expected) ? std::isnan(actual) : std::bit_cast<uint32_t>(actual) == std::bit_cast<uint32_t>(expected))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::hex << "0x" << std::bit_cast<uint32_t>(actual) << " where 0x"
                                       << std::bit_cast<uint32_t>(expected) << " was expected";
}

}  // namespace larql::test
