//! CRC-32C (Castagnoli, Kafka's record batch checksum), hardware accelerated where the CPU has
//! it: carry-less multiplication folding (PCLMULQDQ, VPCLMULQDQ with AVX-512) fused with the
//! crc32 instruction on x86_64, PMULL/CRC on ARMv8, chosen at run time.

use crc_fast::{CrcAlgorithm, Digest};

#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// The CRC of the bytes whose CRC is `crc` followed by `data`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        // The standard check value of CRC-32C.
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn append_is_the_crc_of_the_concatenation_at_every_length_and_split() {
        // lengths across the implementation's thresholds (small tails, folding blocks)
        let data: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let bitwise = |d: &[u8]| {
            // the definition: reflected, polynomial 0x82F63B78, init and xorout all ones
            let mut c = !0u32;
            for &b in d {
                c ^= u32::from(b);
                for _ in 0..8 {
                    c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
                }
            }
            !c
        };
        for n in [0usize, 1, 7, 8, 15, 16, 31, 63, 64, 127, 128, 255, 256, 257, 511, 1023, 1024, 2047, 4096, 5000] {
            let whole = super::crc32c(&data[..n]);
            assert_eq!(whole, bitwise(&data[..n]), "length {n}");
            for cut in [0, n / 3, n / 2, n] {
                assert_eq!(super::crc32c_append(super::crc32c(&data[..cut]), &data[cut..n]), whole, "length {n} cut {cut}");
            }
        }
    }
}
