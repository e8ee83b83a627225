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
    // Packed, four bytes a slot (a tag's unused bytes are 0): one load on
    // a claim's path where a `String` a slot cost two, the second often a
    // cache miss.
    static TAGS: OnceLock<Vec<[u8; 4]>> = OnceLock::new();
    let tags = TAGS.get_or_init(tags);
    tags.get(usize::from(slot)).map_or("", |tag| {
        let len = tag.iter().position(|&b| b == 0).unwrap_or(tag.len());
        std::str::from_utf8(&tag[..len]).unwrap_or("")
    })
}

/// Every slot's tag, up to four characters, 0 after its end.
fn tags() -> Vec<[u8; 4]> {
    const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut tags = vec![[0u8; 4]; 16384];
    let mut left = tags.len();
    // Three characters reach every slot; the fourth is never needed, but
    // the search does not rely on that.
    for len in 1..=4 {
        let mut digits = vec![0usize; len];
        'strings: loop {
            let mut s = [0u8; 4];
            for (c, &d) in s.iter_mut().zip(&digits) {
                *c = ALPHABET[d];
            }
            let tag = &mut tags[usize::from(crc16(&s[..len]) % 16384)];
            if tag[0] == 0 {
                *tag = s;
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

/// The slot of a record's hex key, `<prefix>{<the 64 lowercase hex digits
/// of id>}`, from the id's bytes: the CRC16 of the digits, one byte (two
/// digits) a step, without spelling them (the same as [`slot`] of the hex
/// key, pinned by a test).
pub(crate) fn hex_slot(id: &[u8; 32]) -> u16 {
    id.iter().fold(0u16, |crc, &b| {
        let x = crc ^ HEX_DIGITS[usize::from(b)];
        PAIR_TABLE[usize::from(x >> 8)] ^ TABLE[usize::from(x & 0xff)]
    }) % 16384
}

/// CRC16-CCITT (XMODEM), a byte at a time from a table built at compile
/// time.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from(crc.to_be_bytes()[0] ^ b)]
    })
}

/// The CRC's byte step: `TABLE[i]` is what byte `i` leaves in a zero CRC.
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

/// Two bytes a step: the CRC is linear, so after the bytes `a`, `b` on a
/// CRC `c`, with `x = c ^ (a << 8 | b)`, it is `PAIR_TABLE[x >> 8] ^
/// TABLE[x & 0xff]`, where `PAIR_TABLE[i]` is byte `i` followed by a zero
/// byte.
const PAIR_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let t = TABLE[i];
        table[i] = ((t & 0xff) << 8) ^ TABLE[(t >> 8) as usize];
        i += 1;
    }
    table
};

/// Each byte's two lowercase hex digits, the first in the high byte.
const HEX_DIGITS: [u16; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = ((DIGITS[i >> 4] as u16) << 8) | DIGITS[i & 0x0f] as u16;
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::{hex_slot, slot, tag_of};

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
    fn a_records_hex_key_slot_is_found_from_its_bytes() {
        let mut id = [0u8; 32];
        for n in 0..5000u32 {
            // Every byte value in every position, and mixed ids.
            for (i, b) in id.iter_mut().enumerate() {
                *b = u8::try_from((n as usize * 31 + i * 7 + (n as usize >> 3) * i) % 256)
                    .unwrap_or(0);
            }
            let digits: String = id
                .iter()
                .flat_map(|&b| [b >> 4, b & 0x0f])
                .map(|d| char::from_digit(u32::from(d), 16).unwrap_or('?'))
                .collect();
            let hex = format!("idem:{{{digits}}}");
            assert_eq!(hex_slot(&id), slot(hex.as_bytes()), "{hex}");
        }
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
