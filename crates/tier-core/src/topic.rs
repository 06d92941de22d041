use std::{fmt, sync::Arc};

use crate::{ErrorContext, TierError};

/// Longest accepted topic name, in bytes.
pub const MAX_TOPIC_NAME_LEN: usize = 200;

/// A validated topic name.
///
/// Topic names become directory names, Valkey stream keys and object-key prefixes, so
/// only a conservative alphabet is accepted: ASCII letters, digits, `.`, `_` and `-`,
/// 1 to [`MAX_TOPIC_NAME_LEN`] bytes, not starting with `.` (which rules out `.`, `..`
/// and hidden files). `/`, `\`, NUL, whitespace and every other byte are rejected.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName(Arc<str>);

impl TopicName {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<Self, TierError> {
        validate(name).map_err(|why| {
            TierError::invalid(ErrorContext::default(), format!("invalid topic name {name:?}: {why}"))
        })?;
        Ok(Self(Arc::from(name)))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn validate(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(format!("it is {} bytes long; the limit is {MAX_TOPIC_NAME_LEN}", name.len()));
    }
    if name.starts_with('.') {
        return Err("it starts with '.'".into());
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("it contains {bad:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

/// A topic's name as an API takes it: a string, validated where it is used
/// (`InvalidInput` naming what is wrong with it), or a [`TopicName`] validated already.
/// Every method of the router's API that names a topic takes `impl IntoTopicName`, so
/// `store.topic("orders")` and `store.topic(&name)` are the same call.
///
/// ```
/// use tier_core::{IntoTopicName, TopicName};
///
/// let name = TopicName::new("orders").unwrap();
/// assert_eq!("orders".into_topic_name().unwrap(), name);
/// assert_eq!((&name).into_topic_name().unwrap(), name);
/// assert!("no/slashes".into_topic_name().is_err());
/// ```
pub trait IntoTopicName {
    /// The validated name.
    fn into_topic_name(self) -> Result<TopicName, TierError>;
}

impl IntoTopicName for TopicName {
    fn into_topic_name(self) -> Result<TopicName, TierError> {
        Ok(self)
    }
}

impl IntoTopicName for String {
    fn into_topic_name(self) -> Result<TopicName, TierError> {
        TopicName::new(&self)
    }
}

impl IntoTopicName for &TopicName {
    /// Already validated: a reference-count increment.
    fn into_topic_name(self) -> Result<TopicName, TierError> {
        Ok(self.clone())
    }
}

impl IntoTopicName for &str {
    fn into_topic_name(self) -> Result<TopicName, TierError> {
        TopicName::new(self)
    }
}

impl IntoTopicName for &String {
    fn into_topic_name(self) -> Result<TopicName, TierError> {
        TopicName::new(self)
    }
}

impl std::str::FromStr for TopicName {
    type Err = TierError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<&str> for TopicName {
    type Error = TierError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn accepts_ordinary_names() {
        for name in ["orders", "a", "user-events.v2", "A_b-c.d", &"x".repeat(MAX_TOPIC_NAME_LEN)] {
            assert_eq!(TopicName::new(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn rejects_names_that_escape_or_break_paths_and_keys() {
        let long = "x".repeat(MAX_TOPIC_NAME_LEN + 1);
        for (name, why) in [
            ("", "empty"),
            (".", "starts with '.'"),
            ("..", "starts with '.'"),
            ("../etc", "starts with '.'"),
            ("a/b", "'/'"),
            ("a\\b", "'\\\\'"),
            ("a\0b", "'\\0'"),
            ("a b", "' '"),
            ("caf\u{e9}", "'é'"),
            (long.as_str(), "limit is 200"),
        ] {
            let err = TopicName::new(name).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}");
            assert!(err.to_string().contains(why), "{name:?}: {err}");
        }
    }
}
