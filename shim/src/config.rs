//! Configuration, read once at `MPI_Init*` from environment variables with the `MPIXSTREAM_` prefix.
//! The README documents every variable and its default; keep the two in step.
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// `native` where the loaded MPICH has native streams (>= 4.1), else `serial`.
    Auto,
    Native,
    Serial,
}

/// How communicators that the application creates are mapped onto endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Pass-through: MPICH's own (implicit) endpoint hashing.
    Implicit,
    /// Each communicator the application creates gets its own stream (dedicated endpoint).
    Explicit,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Implicit => "implicit",
            Policy::Explicit => "explicit",
        })
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub backend: BackendChoice,
    /// Size of the explicit stream pool (native: `MPIR_CVAR_CH4_RESERVE_VCIS`).
    pub streams: u32,
    /// Size of MPICH's implicit pool on the native backend (`MPIR_CVAR_CH4_NUM_VCIS`); None: MPICH's default.
    pub implicit_vcis: Option<u32>,
    pub policy: Policy,
    pub verbose: bool,
}

/// MPICH's limit on VCIs, implicit and reserved together.
pub const MAX_VCIS: u32 = 64;
pub const DEFAULT_STREAMS: u32 = 8;

impl Config {
    /// Reads the environment. A malformed value is reported with the accepted values.
    pub fn from_env() -> Result<Config, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let backend = match get("MPIXSTREAM_BACKEND").as_deref().map(str::trim) {
            None | Some("") | Some("auto") => BackendChoice::Auto,
            Some("native") => BackendChoice::Native,
            Some("serial") => BackendChoice::Serial,
            Some(v) => return Err(format!("MPIXSTREAM_BACKEND={v}: expected auto, native or serial")),
        };
        let policy = match get("MPIXSTREAM_POLICY").as_deref().map(str::trim) {
            None | Some("") | Some("implicit") => Policy::Implicit,
            Some("explicit") => Policy::Explicit,
            Some(v) => return Err(format!("MPIXSTREAM_POLICY={v}: expected implicit or explicit")),
        };
        let streams = match get("MPIXSTREAM_STREAMS") {
            None => DEFAULT_STREAMS,
            Some(v) => parse_count("MPIXSTREAM_STREAMS", &v, 1, MAX_VCIS - 1)?,
        };
        let implicit_vcis = match get("MPIXSTREAM_IMPLICIT_VCIS") {
            None => None,
            Some(v) => Some(parse_count("MPIXSTREAM_IMPLICIT_VCIS", &v, 1, MAX_VCIS - 1)?),
        };
        if streams + implicit_vcis.unwrap_or(1) > MAX_VCIS {
            return Err(format!(
                "MPIXSTREAM_STREAMS + MPIXSTREAM_IMPLICIT_VCIS = {} exceeds MPICH's limit of {MAX_VCIS} VCIs",
                streams + implicit_vcis.unwrap_or(1)
            ));
        }
        let verbose = parse_flag(get("MPIXSTREAM_VERBOSE"), "MPIXSTREAM_VERBOSE")?;
        Ok(Config { backend, streams, implicit_vcis, policy, verbose })
    }
}

fn parse_count(name: &str, v: &str, lo: u32, hi: u32) -> Result<u32, String> {
    match v.trim().parse::<u32>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{name}={v}: expected a whole number from {lo} to {hi}")),
    }
}

pub fn parse_flag(v: Option<String>, name: &str) -> Result<bool, String> {
    match v.as_deref().map(str::trim) {
        None | Some("") | Some("0") | Some("no") | Some("false") => Ok(false),
        Some("1") | Some("yes") | Some("true") => Ok(true),
        Some(other) => Err(format!("{name}={other}: expected 0 or 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.backend, BackendChoice::Auto);
        assert_eq!(c.policy, Policy::Implicit);
        assert_eq!(c.streams, DEFAULT_STREAMS);
        assert_eq!(c.implicit_vcis, None);
        assert!(!c.verbose);
    }

    #[test]
    fn rejects_bad_values_with_the_accepted_ones() {
        assert!(cfg(&[("MPIXSTREAM_BACKEND", "fast")]).unwrap_err().contains("auto, native or serial"));
        assert!(cfg(&[("MPIXSTREAM_STREAMS", "0")]).unwrap_err().contains("1 to 63"));
        assert!(cfg(&[("MPIXSTREAM_STREAMS", "x")]).is_err());
        assert!(cfg(&[("MPIXSTREAM_STREAMS", "40"), ("MPIXSTREAM_IMPLICIT_VCIS", "30")])
            .unwrap_err()
            .contains("limit of 64"));
        assert!(cfg(&[("MPIXSTREAM_VERBOSE", "maybe")]).is_err());
        assert!(cfg(&[("MPIXSTREAM_POLICY", "hash")]).is_err());
    }

    #[test]
    fn parses_values() {
        let c = cfg(&[
            ("MPIXSTREAM_BACKEND", "serial"),
            ("MPIXSTREAM_STREAMS", "3"),
            ("MPIXSTREAM_IMPLICIT_VCIS", "2"),
            ("MPIXSTREAM_POLICY", "explicit"),
            ("MPIXSTREAM_VERBOSE", "1"),
        ])
        .unwrap();
        assert_eq!(c.backend, BackendChoice::Serial);
        assert_eq!(c.streams, 3);
        assert_eq!(c.implicit_vcis, Some(2));
        assert_eq!(c.policy, Policy::Explicit);
        assert!(c.verbose);
    }
}
