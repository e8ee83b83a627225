//! The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag
//! (the part between the first `{` and the next `}`, when not empty) or of
//! the whole key, modulo 16384.

/// The slot of `key`.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) % 16384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::slot;

    #[test]
    fn slots_are_the_ones_redis_gives() {
        // `CLUSTER KEYSLOT` of each, as Redis 7 answers.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"123456789"), 12739);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"foo{}{bar}"), 8363);
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }
}
