//! Lowercase hexadecimal text of bytes: digests, ids and keys as the gateway writes them (two digits per byte,
//! most significant first).
//!
//! Rules: one table lookup per digit, no formatting machinery (an agent session's id is written this way twice on
//! every request); [`write`] fills a stack buffer and allocates nothing. A neutral leaf: it imports no crate
//! module.

use std::fmt;

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The two digits of `byte`.
fn digits(byte: u8) -> [u8; 2] {
    [DIGITS[usize::from(byte >> 4)], DIGITS[usize::from(byte & 0x0f)]]
}

/// `bytes` as lowercase hex.
pub fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    // Writing to a `String` cannot fail.
    let _ = write(bytes, &mut text);
    text
}

/// Writes `bytes` as lowercase hex to `out` (a `Display` implementation's formatter, say).
pub fn write(bytes: &[u8], out: &mut impl fmt::Write) -> fmt::Result {
    let mut buffer = [0u8; 64];
    for chunk in bytes.chunks(buffer.len() / 2) {
        for (pair, &byte) in buffer.chunks_exact_mut(2).zip(chunk) {
            pair.copy_from_slice(&digits(byte));
        }
        let text = std::str::from_utf8(&buffer[..chunk.len() * 2]).map_err(|_| fmt::Error)?;
        out.write_str(text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lowercase_digits_most_significant_first() {
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(encode(&every), expected);
        let mut written = String::new();
        write(&every, &mut written).unwrap();
        assert_eq!(written, expected, "written across several buffers of 32 bytes");
        assert_eq!(encode(&[]), "");
        assert_eq!(encode(&[0x0f, 0xa0]), "0fa0");
    }
}
