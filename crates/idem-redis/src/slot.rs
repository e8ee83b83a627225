//! The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag
//! (the part between the first `{` and the next `}`, when not empty) or of
//! the whole key, modulo 16384.

use std::sync::OnceLock;

/// The shortest alphanumeric string whose slot is `slot` (the first in
/// the order `0-9`, `A-Z`, `a-z`, shorter strings first): the hash tag of a
/// record's compact key, which puts it in its hex key's slot. This rule
/// fixes the table; a compact record is found by it, so it never changes
/// (pinned by a test).
pub(crate) fn tag_of(slot: u16) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(tags);
    tags.get(usize::from(slot)).map_or("", String::as_str)
}

fn tags() -> Vec<String> {
    const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut tags = vec![String::new(); 16384];
    let mut left = tags.len();
    // Three characters reach every slot; the fourth is never needed, but
    // the search does not rely on that.
    for len in 1..=4 {
        let mut digits = vec![0usize; len];
        'strings: loop {
            let s: Vec<u8> = digits.iter().map(|&d| ALPHABET[d]).collect();
            let tag = &mut tags[usize::from(crc16(&s) % 16384)];
            if tag.is_empty() {
                *tag = s.iter().map(|&b| char::from(b)).collect();
                left -= 1;
                if left == 0 {
                    return tags;
                }
            }
            for d in digits.iter_mut().rev() {
                *d += 1;
                if *d < ALPHABET.len() {
                    continue 'strings;
                }
                *d = 0;
            }
            break;
        }
    }
    tags
}

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

/// CRC16-CCITT (XMODEM), a byte at a time from a table built at compile
/// time (a compact key's tag is looked up on every claim).
fn crc16(bytes: &[u8]) -> u16 {
    const TABLE: [u16; 256] = {
        let mut table = [0u16; 256];
        let mut i: u16 = 0;
        while i < 256 {
            let mut crc = i << 8;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 0x8000 == 0 {
                    crc << 1
                } else {
                    (crc << 1) ^ 0x1021
                };
                bit += 1;
            }
            table[i as usize] = crc;
            i += 1;
        }
        table
    };
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from(crc.to_be_bytes()[0] ^ b)]
    })
}

#[cfg(test)]
mod tests {
    use super::{slot, tag_of};

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

    #[test]
    fn every_slot_has_a_short_tag_of_its_own() {
        for s in 0..16384u16 {
            let tag = tag_of(s);
            assert!((1..=3).contains(&tag.len()), "slot {s}: {tag:?}");
            assert_eq!(slot(format!("x{{{tag}}}y").as_bytes()), s, "{tag}");
        }
        // Pinned: compact records are found by these.
        assert_eq!(
            [tag_of(0), tag_of(1), tag_of(12182), tag_of(16383)],
            ["06S", "Qi", "9Le", "6ZJ"]
        );
    }
}
