//! [`Secret`]: a credential in a configuration (a Valkey password, an S3 secret key).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A credential: serialises as the plain string, but `Debug` and `Display` print `***`
/// (`Debug` as a quoted string, like the `String` it hides), so a configuration holding
/// one can be logged. The warm and cold tiers' configurations use it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call it only where it is handed to a client library.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn never_printed_but_exposed_and_serialised_as_is() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "\"***\"");
        assert_eq!(s.expose(), "hunter2");
        assert_eq!(Secret::from("hunter2".to_owned()), s);
    }
}
