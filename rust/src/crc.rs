//! CRC-32C (Castagnoli), hardware accelerated where the CPU has it (SSE 4.2 / ARMv8 CRC).

#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        // The standard check value of CRC-32C.
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
    }
}
