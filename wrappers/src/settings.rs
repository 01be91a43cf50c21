//! The settings: every `MPIXSTREAM_*` environment variable in one table ([`SETTINGS`]), parsed once at
//! `MPI_Init*` by one strict parser ([`Config::from_lookup`]). A malformed value stops `MPI_Init` with a
//! message naming the variable and the accepted values. The README's configuration table lists exactly
//! these rows with the same defaults (checked by the `readme_lists_every_setting` test), and the verbose
//! banner prints them ([`Config::describe`]).
use std::fmt;
use std::time::Duration;

/// Who reads a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The library, at `MPI_Init*` (strict).
    Library,
    /// `scripts/mpixrun` only (which libraries to preload).
    Scripts,
}

/// One row of the settings table.
pub struct Setting {
    pub name: &'static str,
    /// The default as the README shows it.
    pub default: &'static str,
    /// The accepted values, as error messages name them.
    pub accepted: &'static str,
    pub reader: Reader,
}

const fn lib(name: &'static str, default: &'static str, accepted: &'static str) -> Setting {
    Setting { name, default, accepted, reader: Reader::Library }
}

pub const SETTINGS: &[Setting] = &[
    lib("MPIXSTREAM_BACKEND", "`auto`", "auto, native, serial or split (Intel MPI's thread-split endpoints)"),
    lib(
        "MPIXSTREAM_STREAMS",
        "`8`, fewer with many ranks per node; none where the program cannot gain (docs/policy.md, \"When the policy is inert\") or, under `implicit`, names no `MPIX_Stream_create`",
        "a whole number from 1 to 63",
    ),
    lib("MPIXSTREAM_IMPLICIT_VCIS", "MPICH's (1)", "a whole number from 1 to 63"),
    lib("MPIXSTREAM_POLICY", "`implicit`", "implicit, explicit or guided"),
    lib("MPIXSTREAM_PROFILE", "none", "the path of a profile.json written by `mpixrun --profile`"),
    lib("MPIXSTREAM_VERBOSE", "`0`", "0 or 1"),
    lib("MPIXSTREAM_REPORT", "off", "0, 1 or a file path"),
    lib("MPIXSTREAM_CHECK", "off", "0, 1, policy or all"),
    lib("MPIXSTREAM_THREAD_MULTIPLE", "`0`", "0 or 1"),
    lib("MPIXSTREAM_FINALIZE_TIMEOUT", "`10`", "a number of seconds >= 0"),
    lib("MPIXSTREAM_ENQUEUE_SPIN", "by core count", "a whole number from 0 to 100000000"),
    lib("MPIXSTREAM_ENQUEUE_YIELD_US", "by core count", "a whole number from 0 to 10000000"),
    lib("MPIXSTREAM_CUDA_SYNC", "`auto`", "auto, memops or hostfn"),
    lib("MPIXSTREAM_GPU_AWARE", "`0`", "0 or 1"),
    Setting {
        name: "MPIXSTREAM_LIB", default: "`target/release/…`", accepted: "a file path", reader: Reader::Scripts
    },
    Setting {
        name: "MPIXSTREAM_TOOLS_LIB",
        default: "`target/release/…`",
        accepted: "a file path",
        reader: Reader::Scripts,
    },
    Setting { name: "MPIXSTREAM_GPU_NO_BUILD", default: "`0`", accepted: "0 or 1", reader: Reader::Scripts },
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// `native` where the loaded MPICH has native streams (>= 4.1), else `serial`.
    Auto,
    Native,
    Serial,
    /// Intel MPI's thread-split endpoints: only on request (it changes what Intel MPI allows).
    Split,
}

/// How communicators that the application creates are mapped onto endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Pass-through: MPICH's own (implicit) endpoint hashing.
    Implicit,
    /// Each communicator the application creates gets its own stream (dedicated endpoint).
    Explicit,
    /// As `Explicit`, but only for the communicators on which a contention profile
    /// (`MPIXSTREAM_PROFILE`) saw threads meet; every other one as under `Implicit`.
    Guided,
}

impl Policy {
    /// Whether the policy gives communicators streams at all (the pool, the progress helper).
    pub fn makes_streams(self) -> bool {
        self != Policy::Implicit
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Implicit => "implicit",
            Policy::Explicit => "explicit",
            Policy::Guided => "guided",
        })
    }
}

/// The traffic report of the tools library (`libmpixstream_tools.so`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    Off,
    /// The JSON goes to the default path.
    On,
    /// The JSON goes to this path.
    To(String),
}

/// The one-thread-per-communicator check of the tools library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Off,
    /// Communicators of the explicit policy.
    Policy,
    /// Every stream communicator.
    All,
}

/// How a CUDA queue tells the engine that the queue reached an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaSync {
    /// Stream memory operations where the driver has them, else host functions.
    Auto,
    Memops,
    HostFn,
}

/// The enqueue engine's settings (docs/enqueue.md).
#[derive(Clone, Debug)]
pub struct EnqueueSettings {
    /// `MPI_Init*` asks MPICH for `MPI_THREAD_MULTIPLE` (the engine's threads call MPI).
    pub thread_multiple: bool,
    /// How long `MPI_Finalize` waits for enqueued work.
    pub finalize_timeout: Duration,
    /// Turns a waiting engine thread spins before it yields; `None`: chosen by core count.
    pub spin: Option<u32>,
    /// How long it then yields its core before it sleeps; `None`: chosen by core count.
    pub yield_for: Option<Duration>,
    pub cuda_sync: CudaSync,
    /// The MPI library takes device pointers (no staging).
    pub gpu_aware: bool,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub backend: BackendChoice,
    /// Size of the explicit stream pool (native: `MPIR_CVAR_CH4_RESERVE_VCIS`).
    pub streams: u32,
    /// Whether `MPIXSTREAM_STREAMS` was set (else a pool the user set on MPICH's variable wins).
    pub streams_set: bool,
    /// Size of MPICH's implicit pool on the native backend (`MPIR_CVAR_CH4_NUM_VCIS`); None: MPICH's default.
    pub implicit_vcis: Option<u32>,
    pub policy: Policy,
    /// `MPIXSTREAM_PROFILE`: the contention profile the guided policy follows (set exactly when the
    /// policy is `Guided`).
    pub profile: Option<String>,
    pub verbose: bool,
    pub report: Report,
    pub check: Check,
    pub enqueue: EnqueueSettings,
    /// The variables that were set, with their values (for the banner).
    pub set: Vec<(&'static str, String)>,
}

/// MPICH's limit on VCIs, implicit and reserved together.
pub const MAX_VCIS: u32 = 64;
pub const DEFAULT_STREAMS: u32 = 8;

/// A variable's value, with what the error message needs to name it.
struct Var<'a> {
    setting: &'static Setting,
    value: Option<&'a str>,
}

impl Var<'_> {
    fn bad(&self) -> String {
        format!("{}={}: expected {}", self.setting.name, self.value.unwrap_or(""), self.setting.accepted)
    }

    /// One of `choices` (matched exactly, after trimming), the first when unset or empty.
    fn choice<T: Copy>(&self, choices: &[(&str, T)]) -> Result<T, String> {
        match self.value {
            None | Some("") => Ok(choices[0].1),
            Some(v) => choices.iter().find(|(name, _)| *name == v).map(|&(_, t)| t).ok_or_else(|| self.bad()),
        }
    }

    fn flag(&self) -> Result<bool, String> {
        self.choice(&[("0", false), ("1", true), ("no", false), ("yes", true), ("false", false), ("true", true)])
    }

    fn count(&self, lo: u64, hi: u64) -> Result<Option<u64>, String> {
        match self.value {
            None | Some("") => Ok(None),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
                _ => Err(self.bad()),
            },
        }
    }
}

impl Config {
    /// Reads the environment.
    pub fn from_env() -> Result<Config, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Parses every library setting strictly; the error names the variable and the accepted values.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let values: Vec<Option<String>> = SETTINGS.iter().map(|s| get(s.name).map(|v| v.trim().to_string())).collect();
        let var = |name: &str| -> Var<'_> {
            let i = SETTINGS.iter().position(|s| s.name == name).expect("a row of SETTINGS");
            Var { setting: &SETTINGS[i], value: values[i].as_deref() }
        };
        let backend = var("MPIXSTREAM_BACKEND").choice(&[
            ("auto", BackendChoice::Auto),
            ("native", BackendChoice::Native),
            ("serial", BackendChoice::Serial),
            ("split", BackendChoice::Split),
        ])?;
        let policy = var("MPIXSTREAM_POLICY").choice(&[
            ("implicit", Policy::Implicit),
            ("explicit", Policy::Explicit),
            ("guided", Policy::Guided),
        ])?;
        // The profile and the guided policy go together: one without the other is a mistake, said at once.
        let profile_var = var("MPIXSTREAM_PROFILE");
        let profile = profile_var.value.filter(|v| !v.is_empty()).map(str::to_string);
        match (policy, &profile) {
            (Policy::Guided, None) => {
                return Err(format!(
                    "MPIXSTREAM_POLICY=guided needs MPIXSTREAM_PROFILE: {}",
                    profile_var.setting.accepted
                ))
            }
            (Policy::Implicit | Policy::Explicit, Some(_)) => {
                return Err(format!(
                    "{}, and only under MPIXSTREAM_POLICY=guided (the policy is {policy})",
                    profile_var.bad()
                ))
            }
            _ => {}
        }
        let streams_var = var("MPIXSTREAM_STREAMS");
        let streams = streams_var.count(1, (MAX_VCIS - 1) as u64)?.map_or(DEFAULT_STREAMS, |n| n as u32);
        let implicit_vcis = var("MPIXSTREAM_IMPLICIT_VCIS").count(1, (MAX_VCIS - 1) as u64)?.map(|n| n as u32);
        if streams + implicit_vcis.unwrap_or(1) > MAX_VCIS {
            return Err(format!(
                "MPIXSTREAM_STREAMS + MPIXSTREAM_IMPLICIT_VCIS = {} exceeds MPICH's limit of {MAX_VCIS} VCIs",
                streams + implicit_vcis.unwrap_or(1)
            ));
        }
        let verbose = var("MPIXSTREAM_VERBOSE").flag()?;
        let report = match var("MPIXSTREAM_REPORT").value {
            None | Some("") | Some("0") | Some("no") | Some("false") | Some("off") => Report::Off,
            Some("1") | Some("yes") | Some("true") | Some("on") => Report::On,
            Some(path) => Report::To(path.to_string()),
        };
        let check = var("MPIXSTREAM_CHECK").choice(&[
            ("0", Check::Off),
            ("off", Check::Off),
            ("1", Check::Policy),
            ("policy", Check::Policy),
            ("all", Check::All),
        ])?;
        let timeout = var("MPIXSTREAM_FINALIZE_TIMEOUT");
        let finalize_timeout = match timeout.value {
            None | Some("") => Duration::from_secs(10),
            Some(v) => match v.parse::<f64>() {
                Ok(s) if s.is_finite() && (0.0..=1e9).contains(&s) => Duration::from_secs_f64(s),
                _ => return Err(timeout.bad()),
            },
        };
        let enqueue = EnqueueSettings {
            thread_multiple: var("MPIXSTREAM_THREAD_MULTIPLE").flag()?,
            finalize_timeout,
            spin: var("MPIXSTREAM_ENQUEUE_SPIN").count(0, 100_000_000)?.map(|n| n as u32),
            yield_for: var("MPIXSTREAM_ENQUEUE_YIELD_US").count(0, 10_000_000)?.map(Duration::from_micros),
            cuda_sync: var("MPIXSTREAM_CUDA_SYNC").choice(&[
                ("auto", CudaSync::Auto),
                ("memops", CudaSync::Memops),
                ("hostfn", CudaSync::HostFn),
            ])?,
            gpu_aware: var("MPIXSTREAM_GPU_AWARE").flag()?,
        };
        let set = SETTINGS
            .iter()
            .zip(&values)
            .filter(|(s, v)| s.reader == Reader::Library && v.is_some())
            .map(|(s, v)| (s.name, v.clone().unwrap_or_default()))
            .collect();
        Ok(Config {
            backend,
            streams,
            streams_set: streams_var.value.is_some(),
            implicit_vcis,
            policy,
            profile,
            verbose,
            report,
            check,
            enqueue,
            set,
        })
    }

    /// The settings in force, for the banner: the variables set, the rest at their defaults.
    pub fn describe(&self) -> String {
        if self.set.is_empty() {
            return "settings: all defaults".to_string();
        }
        let set: Vec<String> = self.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("settings: {} (others default)", set.join(" "))
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
        assert!(!c.streams_set);
        assert_eq!(c.implicit_vcis, None);
        assert!(!c.verbose);
        assert_eq!(c.report, Report::Off);
        assert_eq!(c.check, Check::Off);
        assert!(!c.enqueue.thread_multiple);
        assert_eq!(c.enqueue.finalize_timeout, Duration::from_secs(10));
        assert_eq!(c.enqueue.spin, None);
        assert_eq!(c.enqueue.yield_for, None);
        assert_eq!(c.enqueue.cuda_sync, CudaSync::Auto);
        assert!(!c.enqueue.gpu_aware);
        assert_eq!(c.describe(), "settings: all defaults");
    }

    #[test]
    fn rejects_bad_values_with_the_accepted_ones() {
        assert!(cfg(&[("MPIXSTREAM_BACKEND", "fast")]).unwrap_err().contains("auto, native, serial or split"));
        assert_eq!(cfg(&[("MPIXSTREAM_BACKEND", "split")]).unwrap().backend, BackendChoice::Split);
        assert!(cfg(&[("MPIXSTREAM_STREAMS", "0")]).unwrap_err().contains("1 to 63"));
        assert!(cfg(&[("MPIXSTREAM_STREAMS", "x")]).is_err());
        assert!(cfg(&[("MPIXSTREAM_STREAMS", "40"), ("MPIXSTREAM_IMPLICIT_VCIS", "30")])
            .unwrap_err()
            .contains("limit of 64"));
        assert!(cfg(&[("MPIXSTREAM_VERBOSE", "maybe")]).is_err());
        assert!(cfg(&[("MPIXSTREAM_POLICY", "hash")]).is_err());
    }

    /// The guided policy and its profile go together; either alone is an error naming the variable.
    #[test]
    fn guided_needs_its_profile_and_the_profile_needs_guided() {
        let err = cfg(&[("MPIXSTREAM_POLICY", "guided")]).unwrap_err();
        assert!(err.contains("MPIXSTREAM_PROFILE") && err.contains("MPIXSTREAM_POLICY=guided"), "{err}");
        let err = cfg(&[("MPIXSTREAM_POLICY", "explicit"), ("MPIXSTREAM_PROFILE", "p.json")]).unwrap_err();
        assert!(err.starts_with("MPIXSTREAM_PROFILE=p.json: expected ") && err.contains("explicit"), "{err}");
        let c = cfg(&[("MPIXSTREAM_POLICY", "guided"), ("MPIXSTREAM_PROFILE", "out/profile.json")]).unwrap();
        assert_eq!((c.policy, c.profile.as_deref()), (Policy::Guided, Some("out/profile.json")));
        assert!(c.policy.makes_streams() && Policy::Explicit.makes_streams() && !Policy::Implicit.makes_streams());
        assert_eq!(cfg(&[]).unwrap().profile, None);
    }

    #[test]
    fn every_library_setting_rejects_garbage_naming_itself() {
        for s in SETTINGS.iter().filter(|s| s.reader == Reader::Library) {
            if s.name == "MPIXSTREAM_REPORT" {
                continue; // any other text is a path
            }
            let err = cfg(&[(s.name, "abc")]).expect_err(s.name);
            assert!(err.starts_with(&format!("{}=abc: expected ", s.name)), "{err}");
            assert!(err.contains(s.accepted), "{err}");
        }
        assert!(cfg(&[("MPIXSTREAM_FINALIZE_TIMEOUT", "-1")]).is_err());
        assert!(cfg(&[("MPIXSTREAM_FINALIZE_TIMEOUT", "nan")]).is_err());
    }

    #[test]
    fn parses_values() {
        let c = cfg(&[
            ("MPIXSTREAM_BACKEND", "serial"),
            ("MPIXSTREAM_STREAMS", "3"),
            ("MPIXSTREAM_IMPLICIT_VCIS", "2"),
            ("MPIXSTREAM_POLICY", "explicit"),
            ("MPIXSTREAM_VERBOSE", "1"),
            ("MPIXSTREAM_REPORT", "/tmp/r.json"),
            ("MPIXSTREAM_CHECK", "all"),
            ("MPIXSTREAM_THREAD_MULTIPLE", "1"),
            ("MPIXSTREAM_FINALIZE_TIMEOUT", "0.5"),
            ("MPIXSTREAM_ENQUEUE_SPIN", "100"),
            ("MPIXSTREAM_ENQUEUE_YIELD_US", "7"),
            ("MPIXSTREAM_CUDA_SYNC", "hostfn"),
            ("MPIXSTREAM_GPU_AWARE", "1"),
        ])
        .unwrap();
        assert_eq!(c.backend, BackendChoice::Serial);
        assert_eq!(c.streams, 3);
        assert!(c.streams_set);
        assert_eq!(c.implicit_vcis, Some(2));
        assert_eq!(c.policy, Policy::Explicit);
        assert!(c.verbose);
        assert_eq!(c.report, Report::To("/tmp/r.json".into()));
        assert_eq!(c.check, Check::All);
        assert!(c.enqueue.thread_multiple);
        assert_eq!(c.enqueue.finalize_timeout, Duration::from_millis(500));
        assert_eq!(c.enqueue.spin, Some(100));
        assert_eq!(c.enqueue.yield_for, Some(Duration::from_micros(7)));
        assert_eq!(c.enqueue.cuda_sync, CudaSync::HostFn);
        assert!(c.enqueue.gpu_aware);
        assert!(c.describe().contains("MPIXSTREAM_STREAMS=3"));
    }

    /// The README's configuration table lists exactly the rows of `SETTINGS`, with the same defaults.
    #[test]
    fn readme_lists_every_setting() {
        let readme = include_str!("../../README.md");
        let section = readme.split("## Configuration").nth(1).expect("a Configuration section");
        let mut rows = Vec::new();
        for line in section.lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if let Some(name) = cells.get(1).and_then(|c| c.strip_prefix('`')).and_then(|c| c.strip_suffix('`')) {
                rows.push((name.to_string(), cells[2].to_string()));
            }
        }
        let expected: Vec<(String, String)> =
            SETTINGS.iter().map(|s| (s.name.to_string(), s.default.to_string())).collect();
        assert_eq!(rows, expected, "README configuration table vs config::SETTINGS");
    }

    /// Every `MPIXSTREAM_*` name that the code or the scripts read is a row of `SETTINGS`.
    #[test]
    fn the_code_reads_only_listed_settings() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut unlisted = Vec::new();
        for dir in ["shim/src", "tools/src", "wrappers/src", "scripts"] {
            scan(&root.join(dir), &mut unlisted);
        }
        unlisted.sort();
        unlisted.dedup();
        assert!(unlisted.is_empty(), "read but not in config::SETTINGS: {unlisted:?}");
    }

    fn scan(dir: &std::path::Path, unlisted: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                scan(&path, unlisted);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            for (i, _) in text.match_indices("MPIXSTREAM_") {
                let name: String = text[i..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                let name = name.trim_end_matches('_');
                // Names of ours that are not settings: the project root the scripts export, and the
                // names of things in messages ("MPIXSTREAM_*").
                if name == "MPIXSTREAM" || name == "MPIXSTREAM_ROOT" {
                    continue;
                }
                if !SETTINGS.iter().any(|s| s.name == name) {
                    unlisted.push(format!("{name} ({})", path.display()));
                }
            }
        }
    }
}
