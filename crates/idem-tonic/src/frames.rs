//! The gRPC length-prefixed message framing of a request body.

/// The one message of a unary request: whether it is compressed (per the
/// request's `grpc-encoding`), and its bytes as sent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    pub(crate) compressed: bool,
    pub(crate) bytes: &'a [u8],
}

/// Reads the single message of a unary request's body; the error says
/// what is wrong with it.
pub(crate) fn single_message(body: &[u8]) -> Result<Message<'_>, &'static str> {
    let Some((&flag, rest)) = body.split_first() else {
        return Err("the request carries no message");
    };
    if rest.len() < 4 {
        return Err("the request's message frame is cut off");
    }
    let (len, rest) = rest.split_at(4);
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if rest.len() < len {
        return Err("the request's message frame is cut off");
    }
    if rest.len() > len {
        return Err("the request carries more than one message: idem covers unary methods only");
    }
    match flag {
        0 | 1 => Ok(Message {
            compressed: flag == 1,
            bytes: rest,
        }),
        _ => Err("the request's message frame has an unknown compression flag"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_is_read_and_anything_else_is_refused() {
        assert_eq!(
            single_message(&[0, 0, 0, 0, 2, 8, 1]),
            Ok(Message {
                compressed: false,
                bytes: &[8, 1]
            })
        );
        assert_eq!(
            single_message(&[0, 0, 0, 0, 0]),
            Ok(Message {
                compressed: false,
                bytes: &[]
            })
        );
        assert!(single_message(&[]).is_err());
        assert!(single_message(&[0, 0, 0]).is_err());
        assert!(single_message(&[0, 0, 0, 0, 3, 8, 1]).is_err());
        assert!(single_message(&[0, 0, 0, 0, 1, 8, 0, 0, 0, 0, 0]).is_err());
        assert!(single_message(&[7, 0, 0, 0, 0]).is_err());
    }
}
