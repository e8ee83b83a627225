//! The names a SQL store may be given (tables), checked once for every
//! dialect: they are written into the statements, so only plain ones pass.

/// Why a table name was refused.
#[derive(Debug, thiserror::Error)]
#[error("`{name}` is not a valid name: use 1 to {longest} lowercase letters, digits and `_`, not starting with a digit")]
pub struct InvalidName {
    name: String,
    longest: usize,
}

/// `name` if it is 1 to `longest` of `a-z`, `0-9` and `_`, not starting
/// with a digit.
pub(crate) fn check_name(name: &str, longest: usize) -> Result<(), InvalidName> {
    let ok = !name.is_empty()
        && name.len() <= longest
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(InvalidName {
            name: name.to_owned(),
            longest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_of_the_dialects_length_pass() {
        assert!(check_name("records", 64).is_ok());
        assert!(check_name("idem_t_1", 64).is_ok());
        assert!(check_name(&"a".repeat(64), 64).is_ok());
        for bad in ["", "1abc", "Records", "a-b", "a`b", "a\"b", &"a".repeat(65)] {
            let refused = check_name(bad, 64).map(|()| bad);
            assert!(refused.is_err(), "{bad:?} accepted");
        }
        let said = check_name("a-b", 63).map_err(|e| e.to_string());
        assert_eq!(
            said,
            Err("`a-b` is not a valid name: use 1 to 63 lowercase letters, digits and `_`, not starting with a digit".to_owned())
        );
    }
}
