//! The command lines of the project's tools (`gpu-dist`, `gpu-admission check`, `gpu-kwctl`), read
//! with lexopt: one reading of `--flag value`, `--flag=value`, `-f value`, `--` and `-`, and the
//! same messages for a bad flag in every tool. Each tool matches the flags it knows:
//!
//! ```
//! use gpu_e2e::flags::{FlagError, read_flags};
//!
//! let args = ["--root=/src".to_string(), "a.yaml".to_string()];
//! let (mut root, mut paths) = (None, Vec::new());
//! read_flags(&args, &mut paths, |flag, value| {
//!     match flag {
//!         "--root" => root = Some(value.get()?),
//!         other => return Err(FlagError::unknown(other)),
//!     }
//!     Ok(())
//! })?;
//! assert_eq!((root.as_deref(), paths), (Some("/src"), vec!["a.yaml".to_string()]));
//! # Ok::<(), FlagError>(())
//! ```

use std::fmt;

/// A command line the tool cannot read; the message names the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError(String);

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlagError {}

impl FlagError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        FlagError(message.into())
    }

    /// The error for a flag the tool does not know.
    pub fn unknown(flag: &str) -> Self {
        FlagError(format!("unknown option {flag}"))
    }
}

impl From<FlagError> for String {
    fn from(e: FlagError) -> String {
        e.0
    }
}

/// The arguments of a command line (without the program name and the subcommand).
struct Flags(lexopt::Parser);

impl Flags {
    /// Reads `args`.
    fn new(args: &[String]) -> Self {
        Flags(lexopt::Parser::from_args(args.iter().cloned()))
    }

    /// The next flag as it is written, without its value (`-o`, `--output`), after pushing the
    /// positionals before it (paths, URIs, `-`, everything after `--`) onto `positionals`. A flag
    /// given a value it does not take (`--force=yes`) is an error.
    fn next_flag(&mut self, positionals: &mut Vec<String>) -> Result<Option<String>, FlagError> {
        loop {
            return match self.0.next() {
                Ok(None) => Ok(None),
                Ok(Some(lexopt::Arg::Short(c))) => Ok(Some(format!("-{c}"))),
                Ok(Some(lexopt::Arg::Long(name))) => Ok(Some(format!("--{name}"))),
                Ok(Some(lexopt::Arg::Value(value))) => {
                    positionals.push(utf8(value)?);
                    continue;
                }
                Err(lexopt::Error::UnexpectedValue { option, .. }) => {
                    Err(FlagError(format!("{option} takes no value")))
                }
                Err(e) => Err(FlagError(e.to_string())),
            };
        }
    }

    /// The value of `flag`, the flag [`Flags::next_flag`] returned last: `--flag=value`, or the
    /// next argument.
    fn value(&mut self, flag: &str) -> Result<String, FlagError> {
        match self.0.value() {
            Ok(value) => utf8(value),
            Err(_) => Err(FlagError(format!("{flag} needs a value"))),
        }
    }
}

/// Reads `args`: each flag, as it is written (`-o`, `--output`), goes to `each` with the
/// [`Value`] it may take; the positionals (paths, URIs, `-`, everything after `--`) go to
/// `positionals`. The first error, `each`'s or the command line's, stops the reading.
pub fn read_flags(
    args: &[String],
    positionals: &mut Vec<String>,
    mut each: impl FnMut(&str, Value<'_>) -> Result<(), FlagError>,
) -> Result<(), FlagError> {
    let mut flags = Flags::new(args);
    while let Some(flag) = flags.next_flag(positionals)? {
        each(
            &flag,
            Value {
                flags: &mut flags,
                flag: &flag,
            },
        )?;
    }
    Ok(())
}

/// The value of the flag [`read_flags`] passes with it.
pub struct Value<'a> {
    flags: &'a mut Flags,
    flag: &'a str,
}

impl Value<'_> {
    /// `--flag=value`, or the next argument.
    pub fn get(self) -> Result<String, FlagError> {
        self.flags.value(self.flag)
    }
}

fn utf8(value: std::ffi::OsString) -> Result<String, FlagError> {
    value
        .into_string()
        .map_err(|v| FlagError(format!("{} is not UTF-8", v.to_string_lossy())))
}

#[cfg(test)]
mod tests {
    use super::{FlagError, Flags};

    /// The flags and values of `args` in order (a flag ending in `value` takes one), then the
    /// positionals.
    fn read(args: &[&str]) -> Result<(Vec<String>, Vec<String>), FlagError> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut flags = Flags::new(&args);
        let (mut read, mut positionals) = (Vec::new(), Vec::new());
        while let Some(flag) = flags.next_flag(&mut positionals)? {
            read.push(flag.clone());
            if flag.ends_with("value") {
                read.push(flags.value(&flag)?);
            }
        }
        Ok((read, positionals))
    }

    #[test]
    fn flags_values_and_positionals_in_every_spelling() {
        let (read, positionals) =
            read(&["--value=a", "x", "--value", "b", "-f", "-", "--", "--force"]).unwrap();
        assert_eq!(read, ["--value", "a", "--value", "b", "-f"]);
        assert_eq!(positionals, ["x", "-", "--force"]);
    }

    #[test]
    fn bad_flags_are_named() {
        let message = |args: &[&str]| String::from(read(args).unwrap_err());
        assert_eq!(message(&["--value"]), "--value needs a value");
        assert_eq!(message(&["--force=yes"]), "--force takes no value");
        assert_eq!(
            FlagError::unknown("--bogus").to_string(),
            "unknown option --bogus"
        );
    }
}
