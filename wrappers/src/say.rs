//! The one place the libraries print: every message goes to stderr whole, in one `write(2)`.
//!
//! `eprintln!` writes a formatted line in pieces (Rust's stderr is unbuffered: one `write` per
//! argument and per literal piece), so the ranks of a job that fail alike interleaved their lines
//! ("mpixstream: mpixstream: MPIXSTREAM_POLICY=…MPIXSTREAM_POLICY=…"). Here the message is formatted
//! first and written with its newline at once: a write of at most `PIPE_BUF` bytes to the pipe the
//! launcher reads is never mixed with another process's.
//!
//! A message every rank would print alike (a configuration error, the banner) is a message of the job:
//! [`say_once!`] prints it on the launch's rank 0 only. The rank is known before `MPI_Init` from the
//! launcher's environment ([`launch_rank`]); the other ranks fail the same way, silently.
use std::io::Write;

/// Writes `text` (its lines and their newlines) to stderr in one `write(2)` (more only where the
/// kernel takes part of it).
#[cold]
pub fn whole(text: &str) {
    // A closed stderr is not an error of the program's: nothing to do.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `text` and a newline, in one write.
#[cold]
pub fn line(mut text: String) {
    text.push('\n');
    whole(&text);
}

/// `text` and a newline, on the launch's rank 0 only (a message of the job, identical on every rank).
#[cold]
pub fn job_line(text: String) {
    if launch_rank().unwrap_or(0) == 0 {
        line(text);
    }
}

/// This process's rank in the job, as its launcher told it before `MPI_Init`: Hydra (MPICH, Intel MPI)
/// and Slurm's PMI-2 set `PMI_RANK`, PMIx launchers `PMIX_RANK`, Open MPI's `OMPI_COMM_WORLD_RANK`,
/// Slurm `SLURM_PROCID`. None: started without a launcher (a singleton) or by one we do not know.
pub fn launch_rank() -> Option<u64> {
    launch_rank_from(|k| std::env::var(k).ok())
}

fn launch_rank_from(get: impl Fn(&str) -> Option<String>) -> Option<u64> {
    ["PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|k| get(k).and_then(|v| v.trim().parse().ok()))
}

/// `eprintln!` whole: the formatted line and its newline in one `write(2)`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::say::line(::std::format!($($arg)*)) };
}

/// A message of the job (every rank would print it alike): printed whole, on the launch's rank 0 only.
#[macro_export]
macro_rules! say_once {
    ($($arg:tt)*) => { $crate::say::job_line(::std::format!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::launch_rank_from;

    #[test]
    fn the_launchers_rank_variables_in_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(launch_rank_from(env(&[])), None);
        assert_eq!(launch_rank_from(env(&[("PMI_RANK", "3")])), Some(3));
        assert_eq!(launch_rank_from(env(&[("PMIX_RANK", "0"), ("SLURM_PROCID", "5")])), Some(0));
        assert_eq!(launch_rank_from(env(&[("PMI_RANK", "x"), ("SLURM_PROCID", "2")])), Some(2));
    }

    /// One place prints: no `eprintln!`/`eprint!`/`println!` in the libraries' sources but here (a
    /// line written in pieces interleaves with the other ranks').
    #[test]
    fn the_libraries_print_only_through_say() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for dir in ["shim/src", "wrappers/src", "tools/src"] {
            scan(&root.join(dir), &mut found);
        }
        assert!(found.is_empty(), "print through mpixstream_wrappers::say! instead: {found:?}");
    }

    fn scan(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                scan(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("wrappers/src/say.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, l) in text.lines().enumerate() {
                    let code = l.split("//").next().unwrap_or("");
                    if ["eprintln!", "eprint!", "println!", "print!("].iter().any(|m| code.contains(m)) {
                        found.push(format!("{}:{}", path.display(), n + 1));
                    }
                }
            }
        }
    }
}
